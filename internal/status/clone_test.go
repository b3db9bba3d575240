package status_test

import (
	"testing"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/status/statusfile"
	"github.com/ferry-dev/ferry/internal/testing/statustest"
)

// TestClone: a clone holds what the original holds (its file is the
// same), and changing any list of it leaves the original alone.
func TestClone(t *testing.T) {
	for name, st := range statustest.Cases() {
		st.Checks = append(st.Checks, "workers/probe/url")
		st.Created = append(st.Created, events.Resource{Kind: "keypair", Name: "k"})
		want, err := statusfile.Encode(st)
		if err != nil {
			t.Fatal(err)
		}
		c := st.Clone()
		got, err := statusfile.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s: clone differs:\n%s\nwant:\n%s", name, got, want)
		}
		c.Checks[0], c.Created[0].Name = "changed", "changed"
		c.ApprovedBy[0].By = "changed"
		c.Phases[0].Steps[0].State = status.StepFailed
		c.Phases[0].Name = "changed"
		if len(c.Invalid) > 0 {
			c.Invalid[0] = "changed"
		}
		if after, _ := statusfile.Encode(st); string(after) != string(want) {
			t.Errorf("%s: changing the clone changed the original", name)
		}
	}
}
