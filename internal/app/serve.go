package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/observer"
	"github.com/ferry-dev/ferry/internal/reconciler"
)

// The forges `reconciler run --forge` knows.
const (
	ForgeGitHub = "github"
	ForgeGitea  = "gitea"
)

// Forges lists the values of --forge, the default first.
var Forges = []string{ForgeGitHub, ForgeGitea}

// Forge is the forge that hosts the plans repository, which `reconciler
// run` comments on and whose webhooks it receives.
type Forge struct {
	// Kind is ForgeGitHub (also when empty) or ForgeGitea.
	Kind string
	// Repo is owner/name; empty: no comments, no commit statuses.
	Repo string
	// URL is the API's base URL: a GitHub Enterprise server's (empty:
	// api.github.com) or the Gitea server's (required).
	URL string
	// TokenFile holds the token (empty: $GITHUB_TOKEN, or $GITEA_TOKEN for
	// Gitea).
	TokenFile string
	// CommentInterval allows at most one edit per PR comment and commit
	// status per interval.
	CommentInterval time.Duration
	// AllowPushApprovals acts on approvals pushed without a pull request
	// although a forge is configured; otherwise only a merged pull
	// request approves a phase or a rollback.
	AllowPushApprovals bool
	// RequiredReviews is the review policy, phase=count pairs such as
	// "cleanup=2" (reconciler.ParseReviewPolicy): how many approving
	// reviews by accounts with write access other than the author a
	// phase's approving pull request needs. It needs a forge.
	RequiredReviews string
	// OwnersFile holds owners by path, rules like CODEOWNERS'
	// (reconciler.ParseOwners): an approval of a plan whose file has
	// owners needs an approving review by one of them. A local file (a
	// mounted ConfigMap), not one in the plans repository, so that a
	// merge there cannot change who must approve. It needs a forge.
	OwnersFile string
}

// allPhases are the phases of every strategy, for the review policy.
var allPhases = []string{v1alpha1.PhasePrepare, v1alpha1.PhaseNetworkBridge, v1alpha1.PhaseInfrastructure,
	v1alpha1.PhaseCluster, v1alpha1.PhaseControlPlane, v1alpha1.PhaseWorkers, v1alpha1.PhaseRollout,
	v1alpha1.PhaseCutover, v1alpha1.PhaseCleanup}

// policy reads RequiredReviews and OwnersFile.
func (f Forge) policy() (reconciler.Policy, error) {
	p, err := reconciler.ParseReviewPolicy(f.RequiredReviews, allPhases)
	if err != nil {
		return reconciler.Policy{}, usageErrorf("--required-reviews: %v", err)
	}
	if len(p) > 0 && f.Repo == "" {
		return reconciler.Policy{}, usageErrorf("--required-reviews needs a forge (--forge-repo): reviews are asked of it")
	}
	if f.OwnersFile == "" {
		return reconciler.Policy{Reviews: p}, nil
	}
	if f.Repo == "" {
		return reconciler.Policy{}, usageErrorf("--owners-file needs a forge (--forge-repo): reviews are asked of it")
	}
	owners, err := reconciler.ReadOwners(f.OwnersFile)
	if err != nil {
		return reconciler.Policy{}, usageErrorf("--owners-file: %w", err)
	}
	return reconciler.Policy{Reviews: p, Owners: owners}, nil
}

// check refuses an unknown kind, a repository not named owner/name, and a
// Gitea without its URL.
func (f Forge) check() error {
	if _, _, ok := f.ownerName(); f.Repo != "" && !ok {
		return usageErrorf("--forge-repo %q: want owner/name", f.Repo)
	}
	if _, err := f.policy(); err != nil {
		return err
	}
	switch f.Kind {
	case "", ForgeGitHub:
	case ForgeGitea:
		if f.Repo != "" && f.URL == "" {
			return usageErrorf("--forge-url is required with --forge gitea")
		}
	default:
		return usageErrorf("--forge %q: want %s", f.Kind, strings.Join(Forges, " or "))
	}
	return nil
}

func (f Forge) ownerName() (owner, name string, ok bool) {
	owner, name, ok = strings.Cut(f.Repo, "/")
	return owner, name, ok && owner != "" && name != "" && !strings.Contains(name, "/")
}

// webhooks is how the forge signs the webhooks it sends.
func (f Forge) webhooks() gitsource.WebhookDialect {
	if f.Kind == ForgeGitea {
		return gitsource.GiteaWebhooks
	}
	return gitsource.GitHubWebhooks
}

// forgeClient is the forge behind a coalescer, or nothing, and the
// review policy asked of it.
type forgeClient struct {
	coalescer *forge.Coalescer
	policy    reconciler.Policy
}

// open connects to the forge when a repository is named. Without one,
// or with AllowPushApprovals, it warns that approvals are not verified
// with a forge: a commit's author, which anyone who pushes can write,
// approves a phase (docs/migrating.md, "Only a merge approves").
func (f Forge) open(log *slog.Logger) (*forgeClient, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	if f.Repo == "" {
		log.Warn("approvals are not verified with a forge (no --forge-repo): whoever can push to the tracked branch approves phases and rollbacks")
		return &forgeClient{}, nil
	}
	if f.AllowPushApprovals {
		log.Warn("approvals pushed without a pull request are not verified with the forge (--allow-push-approvals): whoever can push to the tracked branch approves phases and rollbacks", "forge", f.Repo)
	}
	owner, name, _ := f.ownerName()
	var client forge.Forge
	if f.Kind == ForgeGitea {
		token, err := forge.ReadToken(f.TokenFile, forge.GiteaTokenEnv)
		if err != nil {
			return nil, err
		}
		if client, err = forge.NewGitea(owner, name, token, f.URL); err != nil {
			return nil, err
		}
	} else {
		token, err := forge.ReadToken(f.TokenFile, forge.TokenEnv)
		if err != nil {
			return nil, err
		}
		if client, err = forge.New(owner, name, token, f.URL); err != nil {
			return nil, err
		}
	}
	policy, err := f.policy() // read once, so that the loop and the previews judge alike
	if err != nil {
		return nil, err
	}
	return &forgeClient{coalescer: forge.NewCoalescer(client, forge.CoalescerOptions{Interval: f.CommentInterval, Logger: log}), policy: policy}, nil
}

// forge is the coalescer as a forge.Forge, nil (not a typed nil) without
// a forge.
func (f *forgeClient) forge() forge.Forge {
	if f.coalescer == nil {
		return nil
	}
	return f.coalescer
}

// close flushes the edits still pending, for at most 30 seconds: ctx is
// the run's, cancelled by then, so only its values are kept.
func (f *forgeClient) close(ctx context.Context) {
	if f.coalescer == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
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
			Branch: s.cfg.Git.Branch, Path: s.src.PlansDir(), Policy: s.forge.policy,
			Running: func(plan string) string { return reconciler.RunningPhase(s.rec.Status(plan)) }}
		s.loop.Commands = &reconciler.Commands{Forge: fg, Statuses: s.rec.Statuses, Retry: s.loop.Retry,
			Preview: s.loop.Previews.Redo, Open: s.loop.Previews.Open}
	}
	return nil
}

// serveWebhook serves the forge's signed push, pull_request and
// issue_comment webhooks on WebhookAddr until ctx ends; each wakes the loop.
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
	srv := webhookServer(gitsource.ForgeWebhookHandler(s.cfg.Forge.webhooks(), secret, s.wakeLeader))
	go func() { _ = srv.Serve(ln) }()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	return nil
}

// webhookServer serves the forge's webhooks with every timeout set: a
// client that sends its request, or reads the answer, slowly, or keeps an
// idle connection, is cut off instead of holding a connection for good. A
// webhook is small and answered at once (the handler only wakes the loop).
func webhookServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
}

// wakeLeader wakes the loop of the replica that leads, which need not be
// this one: it publishes on events.WakeSubject, to which lead subscribes.
// When NATS does not take the message, this replica's own loop is woken
// (it runs when this replica leads, as with one replica).
func (s *server) wakeLeader() {
	if err := s.bus.Conn.Publish(events.WakeSubject, nil); err != nil {
		s.log.Warn("webhook: the leading replica not told over NATS; it sees the change at its next poll", "error", err)
		s.loop.Wake()
	}
}

// relayWakes wakes the loop on every message on events.WakeSubject until
// ctx ends: the webhooks any replica received.
func (s *server) relayWakes(ctx context.Context) {
	sub, err := s.bus.Conn.Subscribe(events.WakeSubject, func(*nats.Msg) { s.loop.Wake() })
	if err != nil {
		s.log.Warn("webhooks received by other replicas do not wake this one; they are seen at the next poll", "error", err)
		return
	}
	go func() {
		<-ctx.Done()
		_ = sub.Unsubscribe()
	}()
}
