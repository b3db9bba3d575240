package workload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/step"
)

// HTTPDoer sends an HTTP request; *http.Client is one.
type HTTPDoer interface {
	Do(*http.Request) (*http.Response, error)
}

// probe fetches the step's URL once, between the drains of two nodes: the
// application must still answer as expected before the next node goes. A
// failure is retryable: the step is redelivered after a back-off, and the
// cutover stops until the application answers again.
func (e *Executor) probe(ctx context.Context, s *job) (events.Report, error) {
	raw, expect := s.params().Get(step.ParamURL), s.params().Get(step.ParamExpect)
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// Do not echo a URL that does not parse: it may hold anything.
		return events.Report{}, failure.Terminal(errors.New("probe: url parameter is not an http(s) URL"))
	}
	// The plan's validation rejects credentials in the URL; redact anyway,
	// since errors and logs are kept.
	shown := u.Redacted()
	ok, err := s.params().Expect()
	if err != nil {
		return events.Report{}, fmt.Errorf("probe %s: %w", shown, err)
	}
	timeout, err := s.timeout(defaultProbeTimeout)
	if err != nil {
		return events.Report{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return events.Report{}, failure.Terminal(fmt.Errorf("probe %s: build request: %w", shown, err))
	}
	req.Header.Set("User-Agent", "ferry-probe")
	do := e.HTTPClient
	if do == nil {
		do = http.DefaultClient
	}
	s.log.InfoContext(ctx, "probing the application", "url", shown, "after", s.ev.Step.Target.Name)
	resp, err := do.Do(req)
	if err != nil {
		// *url.Error repeats the full URL; keep only its cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return events.Report{}, fmt.Errorf("probe %s after Node %s: %w", shown, s.ev.Step.Target.Name, err)
	}
	// Drain a little of the body so the connection can be reused; the
	// content does not matter.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	want := expect
	if want == "" {
		want = step.Expect2xx
	}
	if !ok(resp.StatusCode) {
		return events.Report{}, fmt.Errorf("probe %s after Node %s: status %s, want %s", shown, s.ev.Step.Target.Name, resp.Status, want)
	}
	return events.Report{Message: fmt.Sprintf("probe %s answered %s after Node %s", shown, resp.Status, s.ev.Step.Target.Name)}, nil
}
