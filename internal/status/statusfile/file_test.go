package statusfile

import (
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/testing/golden"
	"github.com/ferry-dev/ferry/internal/testing/statustest"
)

// checkGolden compares got with testdata/golden/name (golden.Check).
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", "golden", name), got)
}

// TestStatusEncode shows the status file's format and reads it back.
func TestStatusEncode(t *testing.T) {
	st := statustest.Cases()["normal"]
	st.Created = []events.Resource{{Kind: "Keypair", ID: "capi-key", Name: "capi-key"}}
	// "no" is a boolean to YAML 1.1 readers: it must come back a string.
	st.Checks = []string{"no", "workers/probe/node/capi-quickstart-md-0-wq8fz"}
	data, err := Encode(st)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "normal.yaml", data)
	back, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, st) {
		t.Errorf("decoded status differs:\n%+v\nwant\n%+v", back, st)
	}
}

// TestInventoryReadBack: the cleanup's inventory comes back from the file
// as it was recorded.
func TestInventoryReadBack(t *testing.T) {
	st := statustest.CleanedUp()
	enc, err := Encode(st)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(enc)
	if err != nil || len(back.Inventory) != 3 || !slices.Equal(back.Inventory, st.Inventory) {
		t.Errorf("inventory read back: %+v, %v; want %+v", back, err, st.Inventory)
	}
}

// TestPath: a plan's file is status/<plan>.yaml; a name that is not a
// plan's is refused.
func TestPath(t *testing.T) {
	if p, err := Path("capi-quickstart"); err != nil || p != "status/capi-quickstart.yaml" {
		t.Errorf("Path(capi-quickstart) = %q, %v", p, err)
	}
	for _, name := range []string{"", "../plans/x", "a/b", ".hidden", "a..b"} {
		if p, err := Path(name); err == nil {
			t.Errorf("Path(%q) = %q; want an error", name, p)
		}
	}
}
