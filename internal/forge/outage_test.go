package forge

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/testing/fakegithub"
)

// TestOutageAnswers checks the stand-in's outage itself: 502 during the
// first half, GitHub's secondary rate limit answer during the second, no
// change to the repository, every request recorded with its answer.
func TestOutageAnswers(t *testing.T) {
	f := newFakeGitHub(t)
	f.AddPR(fakegithub.PR{Number: 3, State: "open", Head: "h3", Base: "main"})
	const d = 400 * time.Millisecond
	end := f.Outage(d)

	// post answers the status, the headers and the body of one comment's
	// POST.
	post := func() (int, http.Header, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, f.URL+"/api/v3/repos/ferry-dev/plans/issues/3/comments", strings.NewReader(`{"body":"hello"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+f.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, body
	}

	if status, _, _ := post(); status != http.StatusBadGateway {
		t.Errorf("first half: status %d, want 502", status)
	}

	time.Sleep(time.Until(end.Add(-d / 4)))
	status, header, body := post()
	var answer struct {
		Message          string `json:"message"`
		DocumentationURL string `json:"documentation_url"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		t.Fatalf("second half: body %q: %v", body, err)
	}
	if status != http.StatusForbidden || header.Get("Retry-After") != "1" ||
		!strings.Contains(answer.Message, "secondary rate limit") || !strings.HasSuffix(answer.DocumentationURL, "#secondary-rate-limits") {
		t.Errorf("second half: status %d, Retry-After %q, body %s; want 403, 1 and the secondary rate limit answer",
			status, header.Get("Retry-After"), body)
	}
	if n := len(f.Comments(3)); n != 0 {
		t.Errorf("%d comments after the outage's answers, want none", n)
	}

	time.Sleep(time.Until(end))
	if status, _, _ := post(); status != http.StatusCreated {
		t.Errorf("after the outage: status %d, want 201", status)
	}
	var got []int
	for _, r := range f.Calls(http.MethodPost) {
		got = append(got, r.Status)
	}
	if want := []int{502, 403, 201}; !slices.Equal(got, want) {
		t.Errorf("recorded answers %v, want %v", got, want)
	}
	if n := f.CountComments(Marker("x"))[3]; n != 0 {
		t.Errorf("CountComments found %d comments with an unused marker", n)
	}
	if n := f.CountComments("hello")[3]; n != 1 {
		t.Errorf("CountComments found %d comments, want the one posted after the outage", n)
	}
}

// TestOutageCoalescerWaitsItOut drives the real client, behind a Coalescer,
// through an outage: updates made during it show once it ends, exactly once,
// and after the rate limit answer no request comes back before Retry-After.
func TestOutageCoalescerWaitsItOut(t *testing.T) {
	f := newFakeGitHub(t)
	f.AddPR(fakegithub.PR{Number: 9, State: "open", Head: "h9", Base: "main"})
	c := newCoalescer(t, f, 20*time.Millisecond, nil)
	ctx := context.Background()
	const key = "plan/prod-eu1"
	const d = 2 * time.Second

	end := f.Outage(d)
	if err := c.UpsertComment(ctx, 9, key, Comment(key, "Progress", "step 1 of 2")); err != nil {
		t.Fatal(err)
	}
	if err := c.SetStatus(ctx, "h9", "ferry/prod-eu1", StatePending, "step 1 of 2", ""); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(end.Add(-d / 4))) // into the rate-limited half
	if err := c.UpsertComment(ctx, 9, key, Comment(key, "Progress", "step 2 of 2")); err != nil {
		t.Fatal(err)
	}
	if err := c.SetStatus(ctx, "h9", "ferry/prod-eu1", StateSuccess, "done", ""); err != nil {
		t.Fatal(err)
	}
	flush(t, c)

	// The state of the world: one comment with the latest body, the latest status.
	if n := f.CountComments(Marker(key)); len(n) != 1 || n[9] != 1 {
		t.Fatalf("comments with the marker by pull request: %v, want exactly one on #9", n)
	}
	for _, cm := range f.Comments(9) {
		if strings.HasPrefix(cm.Body, Marker(key)) && !strings.Contains(cm.Body, "step 2 of 2") {
			t.Errorf("comment shows %q, want the latest update", cm.Body)
		}
	}
	st := f.Statuses()
	if len(st) == 0 || st[len(st)-1].State != StateSuccess || st[len(st)-1].Context != "ferry/prod-eu1" {
		t.Errorf("statuses %+v, want ferry/prod-eu1 success last", st)
	}

	// The requests: errors during the outage only, both kinds seen, and
	// none between a rate limit answer and the time it named.
	calls := f.Calls("")
	var badGateway, limited int
	for i, r := range calls {
		during := r.Time.Before(end)
		switch {
		case during && r.Status == http.StatusBadGateway:
			badGateway++
		case during && r.Status == http.StatusForbidden:
			limited++
			wait := max((end.Sub(r.Time)+time.Second-1)/time.Second*time.Second, time.Second)
			for _, next := range calls[i+1:] {
				if next.Time.Before(r.Time.Add(wait)) {
					t.Errorf("%s %s at +%v: %v after a 403 with Retry-After %v",
						next.Method, next.Path, next.Time.Sub(end.Add(-d)), next.Time.Sub(r.Time), wait)
				}
			}
		case during:
			t.Errorf("%s %s during the outage answered %d", r.Method, r.Path, r.Status)
		case r.Status >= 300:
			t.Errorf("%s %s after the outage answered %d", r.Method, r.Path, r.Status)
		}
	}
	if badGateway == 0 || limited == 0 {
		t.Errorf("%d answers 502 and %d answers 403 in %d requests, want some of each", badGateway, limited, len(calls))
	}
	if s := c.Stats(); s.Dropped != 0 || s.RateLimited == 0 || s.Pending != 0 {
		t.Errorf("stats %+v, want none dropped or pending and a rate limit seen", s)
	}
}
