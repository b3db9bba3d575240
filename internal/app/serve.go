package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/observer"
	"github.com/ferry-dev/ferry/internal/reconciler"
)

// GitHub is the repository on GitHub that `reconciler run` comments on.
type GitHub struct {
	// Repo is owner/name; empty: no comments, no commit statuses.
	Repo string
	// APIURL is a GitHub Enterprise base URL (empty: api.github.com).
	APIURL string
	// TokenFile holds the token (empty: $GITHUB_TOKEN).
	TokenFile string
	// CommentInterval allows at most one edit per PR comment and commit
	// status per interval.
	CommentInterval time.Duration
}

// forgeClient is GitHub behind a coalescer, or nothing.
type forgeClient struct {
	coalescer *forge.Coalescer
}

// open connects to GitHub when a repository is named.
func (g GitHub) open(log *slog.Logger) (*forgeClient, error) {
	if g.Repo == "" {
		return &forgeClient{}, nil
	}
	owner, name, ok := strings.Cut(g.Repo, "/")
	if !ok {
		return nil, usageErrorf("--github-repo %q: want owner/name", g.Repo)
	}
	token, err := forge.TokenFromFile(g.TokenFile)
	if err != nil {
		return nil, err
	}
	gh, err := forge.New(owner, name, token, g.APIURL)
	if err != nil {
		return nil, err
	}
	return &forgeClient{coalescer: forge.NewCoalescer(gh, forge.CoalescerOptions{Interval: g.CommentInterval, Logger: log})}, nil
}

// forge is the coalescer as a forge.Forge, nil (not a typed nil) without
// GitHub.
func (f *forgeClient) forge() forge.Forge {
	if f.coalescer == nil {
		return nil
	}
	return f.coalescer
}

// close flushes the edits still pending, for at most 30 seconds.
func (f *forgeClient) close() {
	if f.coalescer == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = f.coalescer.Close(ctx)
}

// observe gives the loop its observers. They read the CAPI and CAPO objects
// and the plans' Secrets from shared informers; a change they see in a
// namespace marks the plans there for observation and wakes the loop.
func (s *server) observe(ctx context.Context) error {
	cfg, err := s.mgmt.config()
	if err != nil {
		return err
	}
	cached, err := observer.NewCachedClient(ctx, cfg, s.loop.Changed)
	if err != nil {
		return err
	}
	obs := &observer.Observer{Client: cached, WorkloadMaxAge: workloadMaxAge}
	if !s.cfg.NoCloud {
		obs.Cloud = &observer.OpenStack{Client: s.client}
	}
	s.loop.Observer = obs
	if fg := s.forge.forge(); fg != nil {
		// Previews read pull requests' trees: their own observer, same cloud.
		previewObs := &observer.Observer{Client: cached, Cloud: obs.Cloud}
		s.loop.Previews = &reconciler.Previews{Forge: fg, Pulls: reconciler.GitSource{Source: s.src}, Observer: previewObs,
			Branch: s.cfg.Git.Branch, Path: s.src.PlansDir()}
	}
	return nil
}

// serveWebhook serves GitHub's signed push and pull_request webhooks on
// WebhookAddr until ctx ends; each wakes the loop.
func (s *server) serveWebhook(ctx context.Context) error {
	if s.cfg.WebhookAddr == "" {
		return nil
	}
	secret, err := gitsource.ReadWebhookSecret(s.cfg.WebhookSecretFile)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.cfg.WebhookAddr)
	if err != nil {
		return fmt.Errorf("webhook address: %w", err)
	}
	srv := &http.Server{Handler: gitsource.WebhookHandler(secret, s.loop.Wake), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	return nil
}
