package ostest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// CallOutage bounds the longest run of failed calls of the caller through
// a replace migration: the web pods leave one at a time under their
// budget, each answering for 3 s after SIGTERM (testapp serve) while the
// kube-proxies take it out of the Service, so no call need fail; the
// bound leaves room for one call lost on a loaded machine (a call gives
// up after 1 s, and the next one is 100 ms later).
const CallOutage = 2 * time.Second

// RunCaller runs the caller of the web application (testenv.RunWeb) on
// the old cloud's edge node, through Service web, from now until the
// test ends.
func (r *Replaceable) RunCaller(ctx context.Context) (*testenv.Caller, error) {
	var svc corev1.Service
	if err := r.Workload.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "web"}, &svc); err != nil {
		return nil, fmt.Errorf("the web Service: %w", err)
	}
	return r.Workload.RunCaller(ctx, "caller", r.Edge, "http://"+svc.Spec.ClusterIP+"/")
}

// Calls says what the caller counted so far, in a line: calls, answered,
// failed, the longest outage and the answers by web pod and its node.
func (r *Replaceable) Calls(ctx context.Context, c *testenv.Caller) string {
	counts, err := c.Counts(ctx)
	if err != nil {
		return err.Error()
	}
	where := map[string]string{}
	if pods, err := r.Workload.Pods(ctx, "default", testenv.WebLabels, func(*corev1.Pod) bool { return true }); err == nil {
		for _, p := range pods {
			where[p.Name] = p.Spec.NodeName
		}
	}
	var by []string
	for answer, n := range counts.Answers {
		pod, _, _ := strings.Cut(answer, " ")
		node := where[pod]
		if node == "" {
			node = "gone"
		}
		by = append(by, fmt.Sprintf("%s on %s: %d", pod, node, n))
	}
	slices.Sort(by)
	return fmt.Sprintf("%d calls, %d answered, %d failed, longest outage %s; answers by web pod: %s",
		counts.Calls, counts.OK, counts.Failed, counts.LongestOutage.Round(time.Millisecond), strings.Join(by, ", "))
}

// CallsKept checks what the caller counted through a whole replace
// migration: CallsAnswered, and answers from the web pods now on the new
// nodes, and the edge node's tunnel sent at least a packet per such
// answer: they crossed between the clouds through the overlay.
func (r *Replaceable) CallsKept(ctx context.Context, c *testenv.Caller) []Check {
	checks, counts := r.CallsAnswered(ctx, c)
	if counts == nil {
		return checks
	}
	pods, err := r.Workload.Pods(ctx, "default", testenv.WebLabels, testenv.Serving)
	fromNew, stray := 0, []string{}
	for _, p := range pods {
		if !slices.Contains(r.Booted(), p.Spec.NodeName) {
			stray = append(stray, p.Name+" on "+p.Spec.NodeName)
		}
		fromNew += counts.Answers[p.Name+" "+c.IP()]
	}
	_, sent, linkErr := r.Nodes.LinkStats(r.Edge, testenv.VPNTunnel)
	return append(checks,
		Check{Name: "web on the new nodes", OK: err == nil && len(pods) > 0 && len(stray) == 0,
			Detail: fmt.Sprintf("%d web pods serving, not on a new node: %v%s", len(pods), stray, errText(err))},
		Check{Name: "calls through the overlay", OK: linkErr == nil && fromNew > 0 && sent >= fromNew,
			Detail: fmt.Sprintf("%d answers from the web pods on the new nodes; the edge node's tunnel %s sent %d packets%s", fromNew, testenv.VPNTunnel, sent, errText(linkErr))})
}

// CallsAnswered checks what the caller counted so far: every call
// counted once, no run of failures longer than CallOutage, every answer
// naming the caller's own address (nothing rewrote it on the way). It
// returns the counts too (nil when the caller could not be read).
func (r *Replaceable) CallsAnswered(ctx context.Context, c *testenv.Caller) ([]Check, *testenv.CallerCounts) {
	counts, err := c.Counts(ctx)
	if err != nil {
		return []Check{{Name: "the caller counted", Detail: err.Error()}}, nil
	}
	var rewritten []string
	for answer := range counts.Answers {
		if _, from, _ := strings.Cut(answer, " "); from != c.IP() {
			rewritten = append(rewritten, answer)
		}
	}
	return []Check{
		{Name: "every call counted", OK: counts.Calls > 0 && counts.Calls == counts.OK+counts.Failed,
			Detail: fmt.Sprintf("%d calls: %d answered, %d failed", counts.Calls, counts.OK, counts.Failed)},
		{Name: "calls kept answered", OK: counts.LongestOutage <= CallOutage,
			Detail: fmt.Sprintf("longest run of failed calls %s (bound %s; last error %q)", counts.LongestOutage.Round(time.Millisecond), CallOutage, counts.LastError)},
		{Name: "the caller's address kept", OK: len(counts.Answers) > 0 && len(rewritten) == 0,
			Detail: fmt.Sprintf("answers naming another caller than %s: %v", c.IP(), rewritten)},
	}, &counts
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return " (" + err.Error() + ")"
}
