package reconciler

// History only moves forward: the last revision the loop acted on is kept
// where only ferry writes, and a head that does not descend from it stops
// every plan until a person acknowledges the rewrite.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ferry-dev/ferry/internal/logging"
)

// HistoryMark is what the loop keeps about the plans repository's history.
type HistoryMark struct {
	// ActedOn is the last revision at which the loop published a step.
	ActedOn string
	// Acknowledged is a head that does not descend from ActedOn, which a
	// person said ferry may act on: the history was rewritten on purpose.
	Acknowledged string
	// Keypairs are the keypairs ferry created, by plan: what a rollback
	// may delete. The status branch lists them too, but anyone who can
	// push there could add one ferry did not create.
	Keypairs map[string][]string
}

// HistoryStore keeps the HistoryMark where only ferry (and the people who
// administer it) can write: not in the plans repository, whose history is
// what it guards, nor on the status branch, which anyone who may push
// there can edit.
type HistoryStore interface {
	// Load returns the mark; the zero mark when none was saved.
	Load(ctx context.Context) (HistoryMark, error)
	// Save writes the mark.
	Save(ctx context.Context, m HistoryMark) error
}

// Ancestry tells whether one revision descends from another.
type Ancestry interface {
	// Descends reports whether ancestor is rev or one of its ancestors;
	// false when ancestor is not a known commit.
	Descends(rev, ancestor string) (bool, error)
}

// history is the loop's side of the HistoryStore: the mark as last loaded
// or saved, and the head found rewritten, if any.
type history struct {
	mu        sync.Mutex
	loaded    bool
	mark      HistoryMark
	rewritten string // why the head is not acted on; "" when it may be
	// volatile: the store has nowhere to keep the mark (its namespace
	// does not exist), so it is kept in memory only and, after a restart,
	// the status branch's list of created keypairs is all there is.
	volatile bool
}

// loadHistory reads the mark from the store. l.history.mu is held.
func (l *Loop) loadHistory(ctx context.Context) error {
	h := &l.history
	m, err := l.History.Load(ctx)
	if errors.Is(err, ErrNoHistoryNamespace) {
		if !h.volatile {
			logging.From(ctx).Warn("the last revision acted on and the keypairs ferry created are kept in memory only: a rewritten history is not noticed across a restart, and a rollback deletes the keypairs the status branch lists", "error", err)
		}
		h.volatile, h.loaded = true, true
		return nil
	}
	if err != nil {
		return err
	}
	h.mark, h.loaded, h.volatile = m, true, false
	return nil
}

// checkHistory decides whether the loop may act at rev: yes when nothing
// was acted on yet, when rev descends from the last revision acted on, or
// when a person acknowledged rev. The mark is read again while the head is
// held, so that an acknowledgement is seen at the next cycle. It returns
// why not, or "".
func (l *Loop) checkHistory(ctx context.Context, rev string) string {
	if l.History == nil {
		return ""
	}
	h := &l.history
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.loaded || h.rewritten != "" {
		if err := l.loadHistory(ctx); err != nil {
			h.rewritten = fmt.Sprintf("the last revision ferry acted on could not be read, so the branch's history cannot be checked: %v", err)
			return h.rewritten
		}
	}
	h.rewritten = ""
	m := h.mark
	if m.ActedOn == "" || rev == m.ActedOn || rev == m.Acknowledged {
		return ""
	}
	ok, err := l.ancestry().Descends(rev, m.ActedOn)
	switch {
	case err != nil:
		h.rewritten = fmt.Sprintf("could not tell whether the head %s descends from %s, the last revision ferry acted on: %v", short(rev), short(m.ActedOn), err)
	case !ok:
		h.rewritten = fmt.Sprintf("history rewritten: the branch's head %s does not descend from %s, the last revision ferry acted on (a force-push or a reset); nothing runs until someone who administers ferry acknowledges the new head (docs/security.md)", short(rev), short(m.ActedOn))
		logging.From(ctx).Error("the plans repository's history was rewritten: nothing runs until the new head is acknowledged", "head", short(rev), "acted_on", short(m.ActedOn))
	}
	return h.rewritten
}

// rewritten is why the loop may not act at the head it last checked, or
// "".
func (l *Loop) rewritten() string {
	l.history.mu.Lock()
	defer l.history.mu.Unlock()
	return l.history.rewritten
}

// actingOn records, before the loop's first step at rev, that it acts on
// rev: the mark moves forward to rev, never back to an ancestor of the
// revision already recorded (a worker still on an earlier revision) unless
// a person acknowledged rev. A mark that cannot be saved holds the step
// back.
func (l *Loop) actingOn(ctx context.Context, rev string) error {
	if l.History == nil {
		return nil
	}
	h := &l.history
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.loaded || h.mark.ActedOn == rev {
		return nil
	}
	if h.mark.ActedOn != "" && rev != h.mark.Acknowledged {
		older, err := l.ancestry().Descends(h.mark.ActedOn, rev)
		if err != nil {
			return err
		}
		if older {
			return nil // a worker still on an earlier revision
		}
	}
	m := HistoryMark{ActedOn: rev, Keypairs: h.mark.Keypairs}
	err := l.History.Save(ctx, m)
	switch {
	case errors.Is(err, ErrNoHistoryNamespace):
		// Kept in memory only: the history is guarded while this
		// process runs, not across a restart.
		if !h.volatile {
			logging.From(ctx).Warn("the last revision acted on is kept in memory only: a rewritten history is not noticed across a restart", "error", err)
		}
		h.volatile = true
	case err != nil:
		return fmt.Errorf("record revision %s as acted on: %w", short(rev), err)
	}
	h.mark = m
	return nil
}

// ErrNoHistoryNamespace is a HistoryStore's error when the namespace it
// keeps the mark in does not exist.
var ErrNoHistoryNamespace = errors.New("the namespace of the history ConfigMap does not exist")

// ancestry is the loop's Source as an Ancestry; one that cannot tell
// says no revision descends from another, so that nothing runs.
func (l *Loop) ancestry() Ancestry {
	if a, ok := l.Source.(Ancestry); ok {
		return a
	}
	return noAncestry{}
}

type noAncestry struct{}

func (noAncestry) Descends(string, string) (bool, error) {
	return false, errors.New("the plans repository's source cannot tell ancestry")
}

// ConfigMapHistory keeps the HistoryMark in a ConfigMap of the management
// cluster (keys actedOn and acknowledged), in ferry's namespace, where
// RBAC lets ferry's ServiceAccount and its administrators write and no
// one who can only push to the plans repository can. A person
// acknowledges a rewritten head by writing it under acknowledged.
type ConfigMapHistory struct {
	Client          kubernetes.Interface
	Namespace, Name string
}

// Keys of ConfigMapHistory's ConfigMap; the keypairs ferry created for a
// plan are under HistoryKeypairsPrefix + the plan's name, comma-separated.
const (
	HistoryActedOnKey      = "actedOn"
	HistoryAcknowledgedKey = "acknowledged"
	HistoryKeypairsPrefix  = "keypairs."
)

// Load reads the ConfigMap; none is the zero mark.
func (c ConfigMapHistory) Load(ctx context.Context) (HistoryMark, error) {
	cm, err := c.Client.CoreV1().ConfigMaps(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// None yet, or nowhere to keep one: a namespace ferry may not
		// read counts as there.
		if _, err := c.Client.CoreV1().Namespaces().Get(ctx, c.Namespace, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return HistoryMark{}, fmt.Errorf("%w: %s", ErrNoHistoryNamespace, c.Namespace)
		}
		return HistoryMark{}, nil
	}
	if err != nil {
		return HistoryMark{}, fmt.Errorf("read ConfigMap %s/%s: %w", c.Namespace, c.Name, err)
	}
	m := HistoryMark{ActedOn: cm.Data[HistoryActedOnKey], Acknowledged: cm.Data[HistoryAcknowledgedKey]}
	for k, v := range cm.Data {
		if plan, ok := strings.CutPrefix(k, HistoryKeypairsPrefix); ok && v != "" {
			if m.Keypairs == nil {
				m.Keypairs = map[string][]string{}
			}
			m.Keypairs[plan] = strings.Split(v, ",")
		}
	}
	return m, nil
}

// Save writes the ConfigMap, creating it when missing.
func (c ConfigMapHistory) Save(ctx context.Context, m HistoryMark) error {
	data := map[string]string{HistoryActedOnKey: m.ActedOn}
	if m.Acknowledged != "" {
		data[HistoryAcknowledgedKey] = m.Acknowledged
	}
	for plan, keypairs := range m.Keypairs {
		data[HistoryKeypairsPrefix+plan] = strings.Join(keypairs, ",")
	}
	cms := c.Client.CoreV1().ConfigMaps(c.Namespace)
	cm, err := cms.Get(ctx, c.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "ferry"}}, Data: data}, metav1.CreateOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%w: %s: %w", ErrNoHistoryNamespace, c.Namespace, err)
		}
	} else if err == nil {
		cm.Data = data
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("write ConfigMap %s/%s: %w", c.Namespace, c.Name, err)
	}
	return nil
}

// createdKeypairs records, in the HistoryStore, keypairs that a step of
// plan created, so that a rollback may delete them. A record that cannot
// be saved is logged: the keypair is then left in the cloud by a rollback
// rather than deleted on the status branch's word.
func (l *Loop) createdKeypairs(ctx context.Context, plan string, keypairs []string) {
	if l.History == nil || len(keypairs) == 0 {
		return
	}
	h := &l.history
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.loaded {
		if err := l.loadHistory(ctx); err != nil {
			logging.From(ctx).Warn("keypairs created but not recorded: a rollback will leave them", "plan", plan, "keypairs", keypairs, "error", err)
			return
		}
	}
	known := h.mark.Keypairs[plan]
	added := false
	for _, k := range keypairs {
		if !slices.Contains(known, k) {
			known, added = append(known, k), true
		}
	}
	if !added {
		return
	}
	slices.Sort(known)
	m := h.mark
	m.Keypairs = maps.Clone(m.Keypairs)
	if m.Keypairs == nil {
		m.Keypairs = map[string][]string{}
	}
	m.Keypairs[plan] = known
	err := l.History.Save(ctx, m)
	switch {
	case errors.Is(err, ErrNoHistoryNamespace):
		h.volatile = true
	case err != nil:
		logging.From(ctx).Warn("keypairs created but not recorded: a rollback will leave them", "plan", plan, "keypairs", keypairs, "error", err)
		return
	}
	h.mark = m
}

// trustedKeypairs keeps of keypairs (the record's, restored from the
// status branch) those the HistoryStore says ferry created for plan; all
// of them without a HistoryStore, or with one that has nowhere to keep
// them (volatile).
func (l *Loop) trustedKeypairs(plan string, keypairs []string) []string {
	if l.History == nil || len(keypairs) == 0 {
		return keypairs
	}
	l.history.mu.Lock()
	defer l.history.mu.Unlock()
	if l.history.volatile {
		return keypairs
	}
	known := l.history.mark.Keypairs[plan]
	return slices.DeleteFunc(slices.Clone(keypairs), func(k string) bool { return !slices.Contains(known, k) })
}
