package statusfile

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/status"
)

// Encode renders the status as the YAML document of status/<plan>.yaml:
// fields in the order of the structs, under their JSON names, and strings
// that a YAML 1.1 reader would take for booleans quoted, so that every YAML
// tool reads it back the same.
//
// The document's nodes are built here, field by field, rather than by
// reading json.Marshal's output back as YAML: that round trip took half of
// Encode's time, and Encode a sixth of the reconciler's CPU at 1,000
// plans. Most documents are then written by writeBlock, byte for byte as
// yaml.v3 would write them: its emitter keeps every event of a document,
// some 500 KB for a plan's status. TestEncodeMatchesJSON holds Encode to
// the JSON round trip for every field, tricky strings and plain ones, so a
// field added to a type and not here fails it.
func Encode(st *status.PlanStatus) ([]byte, error) {
	doc := planNode(st)
	var b bytes.Buffer
	if writeBlock(&b, doc.Content[0], 0, false) {
		return b.Bytes(), nil
	}
	b.Reset()
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encode status of %s: %w", st.Plan, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode status of %s: %w", st.Plan, err)
	}
	return b.Bytes(), nil
}

func planNode(st *status.PlanStatus) *yaml.Node {
	nb := &nodes{}
	m := nb.mapping()
	m.str("plan", st.Plan)
	m.str("revision", st.Revision)
	m.strOmit("approve", st.Approve)
	m.strOmit("approved", st.Approved)
	mappings(m, "approvedBy", st.ApprovedBy, func(am mapping, a *status.Approval) {
		am.str("phase", a.Phase)
		am.str("by", a.By)
		am.intOmit("pr", a.PR)
		am.strOmit("commit", a.Commit)
		am.strOmit("content", a.Content)
	})
	switch {
	case st.Phases == nil:
		m.add("phases", nb.scalar("!!null", "null"))
	case len(st.Phases) == 0:
		m.seq("phases") // [], as JSON has it
	default:
		mappings(m, "phases", st.Phases, phaseFields)
	}
	mappings(m, "created", st.Created, func(rm mapping, r *events.Resource) {
		rm.str("kind", r.Kind)
		rm.strOmit("id", r.ID)
		rm.str("name", r.Name)
	})
	m.strs("checks", st.Checks)
	mappings(m, "inventory", st.Inventory, func(im mapping, it *status.InventoryItem) {
		im.str("resource", it.Resource)
		im.str("state", it.State)
		im.strOmit("reason", it.Reason)
	})
	m.strOmit("stopped", st.Stopped)
	m.strOmit("rollback", st.Rollback)
	m.strs("invalid", st.Invalid)
	m.strOmit("unobserved", st.Unobserved)
	m.time("updatedAt", st.UpdatedAt)
	return &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{m.n}}
}

func phaseFields(m mapping, ph *status.PhaseStatus) {
	m.str("name", ph.Name)
	m.str("state", string(ph.State))
	m.strOmit("reason", ph.Reason)
	m.int("done", ph.Done)
	m.int("left", ph.Left)
	if ph.Undo {
		m.add("undo", m.nb.scalar("!!bool", "true"))
	}
	m.time("started", ph.Started)
	m.time("finished", ph.Finished)
	m.time("since", ph.Since)
	mappings(m, "steps", ph.Steps, stepFields)
}

func stepFields(m mapping, s *status.StepStatus) {
	m.str("key", s.Key)
	m.str("executor", string(s.Executor))
	m.str("action", string(s.Action))
	m.str("target", s.Target)
	m.str("state", string(s.State))
	m.intOmit("attempts", s.Attempts)
	m.strOmit("lastError", s.LastError)
	m.strOmit("message", s.Message)
	m.strOmit("revision", s.Revision)
	m.time("started", s.Started)
	m.time("finished", s.Finished)
	m.time("lastResult", s.LastResult)
	if s.Duration != 0 {
		m.str("duration", time.Duration(s.Duration).String())
	}
}

// nodes hands out a document's nodes from slabs: a plan's status has
// some 800.
type nodes struct{ slab []yaml.Node }

func (nb *nodes) node(kind yaml.Kind, tag, value string) *yaml.Node {
	if len(nb.slab) == cap(nb.slab) {
		nb.slab = make([]yaml.Node, 0, 256)
	}
	nb.slab = append(nb.slab, yaml.Node{Kind: kind, Tag: tag, Value: value})
	return &nb.slab[len(nb.slab)-1]
}

func (nb *nodes) scalar(tag, v string) *yaml.Node { return nb.node(yaml.ScalarNode, tag, v) }

// str is a string scalar. yaml.v3 quotes it where YAML 1.2 would read
// something else; the YAML 1.1 booleans (yes, no, on, off, y, n) are quoted
// here. Bytes that are not UTF-8 become U+FFFD, one each, as in JSON.
func (nb *nodes) str(v string) *yaml.Node {
	n := nb.scalar("!!str", validUTF8(v))
	if len(v) <= 3 && yaml11Bool[strings.ToLower(n.Value)] {
		n.Style = yaml.DoubleQuotedStyle
	}
	return n
}

// mapping appends keys and values to a mapping node as encoding/json
// would write the fields: omitempty and omitzero ones only when set.
type mapping struct {
	nb *nodes
	n  *yaml.Node
}

func (nb *nodes) mapping() mapping {
	return mapping{nb, nb.node(yaml.MappingNode, "!!map", "")}
}

func (m mapping) add(key string, v *yaml.Node) {
	m.n.Content = append(m.n.Content, m.nb.scalar("!!str", key), v)
}

func (m mapping) str(key, v string) { m.add(key, m.nb.str(v)) }

func (m mapping) strOmit(key, v string) {
	if v != "" {
		m.str(key, v)
	}
}

func (m mapping) int(key string, v int) { m.add(key, m.nb.scalar("!!int", strconv.Itoa(v))) }

func (m mapping) intOmit(key string, v int) {
	if v != 0 {
		m.int(key, v)
	}
}

// time writes t as time.Time's MarshalJSON does; the zero time not at all.
func (m mapping) time(key string, t time.Time) {
	if !t.IsZero() {
		m.str(key, t.Format(time.RFC3339Nano))
	}
}

// mappings adds key with a mapping per item, its fields put by fields;
// nothing when there are no items (omitempty).
func mappings[T any](m mapping, key string, items []T, fields func(mapping, *T)) {
	if len(items) == 0 {
		return
	}
	s := m.seq(key)
	for i := range items {
		im := m.nb.mapping()
		fields(im, &items[i])
		s.Content = append(s.Content, im.n)
	}
}

func (m mapping) seq(key string) *yaml.Node {
	s := m.nb.node(yaml.SequenceNode, "!!seq", "")
	m.add(key, s)
	return s
}

func (m mapping) strs(key string, v []string) {
	if len(v) > 0 {
		s := m.seq(key)
		for _, x := range v {
			s.Content = append(s.Content, m.nb.str(x))
		}
	}
}

var yaml11Bool = map[string]bool{"y": true, "yes": true, "n": true, "no": true, "on": true, "off": true}

func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// writeBlock writes n, a block mapping at indent (its first key on the
// current line when inline), as yaml.v3 writes it with an indent of 2. It
// knows only what statuses hold: mappings, sequences of mappings and
// strings, and int, null and string scalars that need no quoting (or only
// plain double quotes, timestamps), on lines too short to fold. It returns
// false, having written part of it, at anything else; yaml.v3 writes that
// document.
func writeBlock(b *bytes.Buffer, n *yaml.Node, indent int, inline bool) bool {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if i > 0 || !inline {
			b.WriteString(spaces[:indent])
		}
		if !plainKey(k) {
			return false
		}
		b.WriteString(k.Value)
		b.WriteByte(':')
		switch v.Kind {
		case yaml.ScalarNode:
			b.WriteByte(' ')
			if !writeScalar(b, v, indent+len(k.Value)+2) {
				return false
			}
			b.WriteByte('\n')
		case yaml.SequenceNode:
			if len(v.Content) == 0 {
				b.WriteString(" []\n")
				continue
			}
			b.WriteByte('\n')
			for _, item := range v.Content {
				if indent+4 > len(spaces) {
					return false
				}
				b.WriteString(spaces[:indent+2])
				b.WriteString("- ")
				switch item.Kind {
				case yaml.MappingNode:
					if len(item.Content) == 0 || !writeBlock(b, item, indent+4, true) {
						return false
					}
				case yaml.ScalarNode:
					if !writeScalar(b, item, indent+4) {
						return false
					}
					b.WriteByte('\n')
				default:
					return false
				}
			}
		default:
			return false
		}
	}
	return len(n.Content) > 0
}

const spaces = "                                "

func plainKey(k *yaml.Node) bool {
	if k.Kind != yaml.ScalarNode || k.Tag != "!!str" || k.Value == "" {
		return false
	}
	for _, c := range []byte(k.Value) {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}

// writeScalar writes a scalar that starts at column, if yaml.v3 would
// write it plain, or a timestamp it would put in double quotes.
func writeScalar(b *bytes.Buffer, n *yaml.Node, column int) bool {
	switch {
	case n.Tag == "!!int" || n.Tag == "!!null" || n.Tag == "!!bool":
		b.WriteString(n.Value)
		return true
	case n.Tag != "!!str" || n.Style != 0 || n.Value == "":
		return false
	case plainString(n.Value, column):
		b.WriteString(n.Value)
		return true
	case n.Value[0] != '-' && (n.Value[0] < '0' || n.Value[0] > '9'):
		return false
	case rfc3339.MatchString(n.Value):
		b.WriteByte('"')
		b.WriteString(n.Value)
		b.WriteByte('"')
		return true
	case goDuration.MatchString(n.Value):
		b.WriteString(n.Value)
		return true
	}
	return false
}

// rfc3339 matches time.RFC3339Nano's output, which YAML reads as a
// timestamp unless quoted.
var rfc3339 = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$`)

// goDuration matches time.Duration's output in ASCII (not µs), which YAML
// reads as a string.
var goDuration = regexp.MustCompile(`^-?([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`)

// plainString reports whether yaml.v3 writes s, starting at column, plain
// and on one line: ASCII letters, digits, single inner spaces and . _ / - ( )
// only, read by YAML as a string (not a number, boolean or null), and
// short enough not to be folded at a space past column 80. A string that
// starts with a digit must look like a commit ID: lowercase hex with a
// letter other than e, so that no YAML number matches it.
func plainString(s string, column int) bool {
	if s == "" || s[len(s)-1] == ' ' {
		return false
	}
	hexLetter, space := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9':
			hexLetter = hexLetter || 'a' <= c && c <= 'f' && c != 'e'
		case c == ' ':
			if i == 0 || s[i-1] == ' ' {
				return false
			}
			space = true
		case i > 0 && strings.IndexByte("._/-()", c) >= 0:
		default:
			return false
		}
	}
	if space && column+len(s) > 80 {
		return false
	}
	switch c := s[0]; {
	case '0' <= c && c <= '9':
		return hexLetter && !strings.HasPrefix(s, "0b") && strings.Trim(s, "0123456789abcdef") == ""
	case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		if len(s) > 5 {
			return true
		}
		l := strings.ToLower(s)
		return !yaml11Bool[l] && !yaml12Word[l]
	}
	return false
}

// yaml12Word are the plain words YAML 1.2 reads as booleans or null;
// yaml11Bool the ones YAML 1.1 adds.
var yaml12Word = map[string]bool{"true": true, "false": true, "null": true}
