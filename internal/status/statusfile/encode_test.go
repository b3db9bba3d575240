package statusfile

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ferry-dev/ferry/internal/status"
)

// encodeViaJSON is how Encode used to work, and the reference it is held
// to: json.Marshal, read back by yaml.v3 as YAML nodes (in the fields'
// order), block style, YAML 1.1 booleans quoted.
func encodeViaJSON(st *status.PlanStatus) ([]byte, error) {
	j, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(j, &doc); err != nil {
		return nil, err
	}
	var block func(n *yaml.Node)
	block = func(n *yaml.Node) {
		n.Style = 0
		if n.Kind == yaml.ScalarNode && n.Tag == "!!str" && yaml11Bool[strings.ToLower(n.Value)] {
			n.Style = yaml.DoubleQuotedStyle
		}
		for _, c := range n.Content {
			block(c)
		}
	}
	block(&doc)
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	err = enc.Close()
	return b.Bytes(), err
}

// trickyStrings are values a YAML writer must quote, escape or fold.
var trickyStrings = []string{
	"", "Succeeded", "yes", "No", "ON", "off", "y", "true", "False", "null", "~", "123", "-1.5", "1e3", "0x1F", "0o17", ".inf",
	"2026-11-22T10:00:00Z", "a: b", "- item", "#comment", "x #y", ": lead", "trailing ", " leading", "\"quoted\"", "'single'",
	"line one\nline two", "line\n", "a\r\nb", "tab\there", "\x00nul", "bad\xffutf8\xfe", "ünïcode ✓", "\u2028sep", "[a, b]", "{a: b}",
	"*alias", "&anchor", "!tag", "%directive", "@at", "`tick", "|", ">", "?", "---", "...", "cordoned Node capi-quickstart-md-0-a",
}

// fill sets every field of v, recursively, to values drawn from r: zero
// or not, nil or empty or full slices, so that every omitempty and
// omitzero branch and every field is met over many draws.
func fill(r *rand.Rand, v reflect.Value, str func(*rand.Rand) string) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			if r.IntN(3) > 0 {
				zone := []*time.Location{time.UTC, time.FixedZone("", 2*3600+30*60)}[r.IntN(2)]
				t := time.Unix(r.Int64N(4e9), r.Int64N(1e9)*int64(r.IntN(2))).In(zone)
				v.Set(reflect.ValueOf(t))
			}
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(r, v.Field(i), str)
			}
		}
	case reflect.Slice:
		switch k := r.IntN(4); k {
		case 0: // nil
		case 1:
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		default:
			n := 1 + r.IntN(3)
			v.Set(reflect.MakeSlice(v.Type(), n, n))
			for i := range n {
				fill(r, v.Index(i), str)
			}
		}
	case reflect.String:
		v.SetString(str(r))
	case reflect.Int, reflect.Int64:
		v.SetInt([]int64{0, 0, 1, 42, -3, int64(1500 * time.Millisecond)}[r.IntN(6)])
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 0)
	default:
		panic("fill: no values for " + v.Type().String())
	}
}

func tricky(r *rand.Rand) string { return trickyStrings[r.IntN(len(trickyStrings))] }

// plain draws strings writeBlock may write itself: words of letters,
// digits and . _ / - ( ), commit IDs, lengths on both sides of the column
// where yaml.v3 folds, and now and then one it must leave to yaml.v3.
func plain(r *rand.Rand) string {
	const hex, word = "0123456789abcdef", "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._/-()"
	switch r.IntN(96) {
	case 0, 1, 2, 3, 4, 5, 6, 7:
		b := make([]byte, 40)
		for i := range b {
			b[i] = hex[r.IntN(len(hex))]
		}
		return string(b)
	case 8:
		return tricky(r)
	case 9:
		return time.Duration(r.Int64N(int64(100 * time.Hour))).Round(time.Millisecond).String()
	}
	var b []byte
	for n := r.IntN(14); len(b) == 0 || n > 0; n-- {
		if len(b) > 0 {
			b = append(b, ' ')
		}
		b = append(b, "abcdefghijklmnopqrstuvwxyz"[r.IntN(26)])
		for range r.IntN(9) {
			b = append(b, word[r.IntN(len(word))])
		}
	}
	return string(b)
}

// TestEncodeMatchesJSON holds Encode, both its own block writer and its
// yaml.v3 fallback, to the JSON round trip it replaced, and reads what it
// wrote back.
func TestEncodeMatchesJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	written := 0
	for i := range 4000 {
		str := tricky
		if i%2 == 1 {
			str = plain
		}
		var st status.PlanStatus
		fill(r, reflect.ValueOf(&st).Elem(), str)
		got, err := Encode(&st)
		if err != nil {
			t.Fatalf("draw %d: Encode: %v", i, err)
		}
		want, err := encodeViaJSON(&st)
		if err != nil {
			t.Fatalf("draw %d: reference: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("draw %d: Encode differs from json.Marshal read as YAML\ngot:\n%s\nwant:\n%s", i, got, want)
		}
		if writeBlock(&bytes.Buffer{}, planNode(&st).Content[0], 0, false) {
			written++
		}
		back, err := Decode(got)
		if err != nil {
			t.Fatalf("draw %d: Decode: %v\n%s", i, err, got)
		}
		if again, _ := Encode(back); !bytes.Equal(again, got) {
			t.Fatalf("draw %d: read back and encoded again differs\nfirst:\n%s\nagain:\n%s", i, got, again)
		}
	}
	// Plain draws with no tricky string in them go through writeBlock.
	if written < 150 {
		t.Errorf("writeBlock wrote %d of 4000 documents; the test draws too few it can write", written)
	}
	t.Logf("writeBlock wrote %d of 4000 documents", written)
	// And so does a real one.
	if !writeBlock(&bytes.Buffer{}, planNode(benchStatus()).Content[0], 0, false) {
		t.Error("writeBlock left the seed 000 status to yaml.v3")
	}
}

// BenchmarkEncode compares Encode with the JSON round trip it replaced,
// on a plan status as the seed 000 adopt plan has it half-way.
func BenchmarkEncode(b *testing.B) {
	st := benchStatus()
	for _, bc := range []struct {
		name string
		fn   func(*status.PlanStatus) ([]byte, error)
	}{{"Encode", Encode}, {"json-round-trip", encodeViaJSON}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.fn(st); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchStatus() *status.PlanStatus {
	at := time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.UTC)
	st := &status.PlanStatus{Plan: "capi-quickstart", Revision: "0123456789abcdef0123456789abcdef01234567", Approve: "cluster", Approved: "cluster",
		ApprovedBy: []status.Approval{{Phase: "cluster", By: "alice", PR: 12}}, UpdatedAt: at}
	for _, phase := range []string{"cluster", "control-plane", "workers"} {
		ph := status.PhaseStatus{Name: phase, State: status.PhaseRunning, Done: 9, Left: 0, Started: at}
		for i := range 9 {
			ph.Steps = append(ph.Steps, status.StepStatus{Key: phase + "/create-paused/OpenStackMachine/capi-quickstart-" + string(rune('a'+i)),
				Executor: "kube", Action: "create-paused", Target: "OpenStackMachine default/capi-quickstart-md-0-" + string(rune('a'+i)),
				State: status.StepSucceeded, Attempts: 1, Message: "created OpenStackMachine default/capi-quickstart-md-0 paused", Revision: st.Revision,
				Started: at, Finished: at.Add(time.Second), LastResult: at.Add(time.Second), Duration: status.Duration(340 * time.Millisecond)})
		}
		st.Phases = append(st.Phases, ph)
	}
	return st
}
