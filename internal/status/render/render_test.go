package render

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ferry-dev/ferry/internal/testing/golden"
	"github.com/ferry-dev/ferry/internal/testing/statustest"
)

// checkGolden compares got with testdata/golden/name (golden.Check).
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", "golden", name), got)
}

func TestStatusTable(t *testing.T) {
	for name, st := range statustest.Cases() {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := Table(&b, st); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, name+".txt", b.Bytes())
		})
	}
}

func TestStatusMarkdown(t *testing.T) {
	const link = "https://github.com/example/plans/blob/ferry/status/status/capi-quickstart.yaml"
	for name, st := range statustest.Cases() {
		t.Run(name, func(t *testing.T) {
			got := Markdown(st, 0, link)
			if strings.Contains(got, "… ") {
				t.Errorf("a short status was truncated")
			}
			checkGolden(t, name+".md", []byte(got))
		})
	}
	t.Run("truncated", func(t *testing.T) {
		const limit = 3000
		got := Markdown(statustest.ManyWorkers(40, "drain Node: cannot evict pod shop/web-0: Cannot evict pod as it would violate the pod's disruption budget."), limit, link)
		if len(got) > limit {
			t.Errorf("Markdown is %d bytes; limit %d", len(got), limit)
		}
		if !strings.Contains(got, "more steps; full status: "+link+"\n") {
			t.Errorf("truncated Markdown does not end with the link:\n%s", got)
		}
		checkGolden(t, "truncated.md", []byte(got))
	})
}

// TestStatusMarkdownLimit: whatever the status holds, the comment stays within
// the limit: GitHub's by default, and tiny ones.
func TestStatusMarkdownLimit(t *testing.T) {
	huge := strings.Repeat("ünïcode error text | ", 600) // ~13 KB per step
	st := statustest.ManyWorkers(500, huge)
	st.Stopped = strings.Repeat("stopped ", 5000)
	for _, limit := range []int{0, 65536, 20000, 1500, 200, 10} {
		got := Markdown(st, limit, "https://example.invalid/status")
		max := limit
		if max == 0 {
			max = MaxCommentLength
		}
		if len(got) > max {
			t.Errorf("limit %d: Markdown is %d bytes", limit, len(got))
		}
		if !utf8.ValidString(got) {
			t.Errorf("limit %d: Markdown cut inside a character", limit)
		}
		if limit >= 1500 && !strings.Contains(got, "more steps; full status: https://example.invalid/status") {
			t.Errorf("limit %d: no link to the full status", limit)
		}
	}
}

// TestInventory: the cleanup's inventory in the table and in the comment.
func TestInventory(t *testing.T) {
	st := statustest.CleanedUp()
	var b bytes.Buffer
	if err := Table(&b, st); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "inventory.txt", b.Bytes())
	checkGolden(t, "inventory.md", []byte(Markdown(st, 0, "")))
}
