package gitsource

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// ErrNoMatch is returned by Introduced when the file at the starting
// revision does not satisfy match: there is no current state to trace.
var ErrNoMatch = errors.New("file does not match at this revision")

// Signature is who made a commit and when.
type Signature struct {
	Name  string
	Email string
	When  time.Time
}

// Commit is a commit of the plans repository, as the reconciler needs it:
// to say who approved a phase and through which pull request, and to tell
// ferry's own status commits from people's.
type Commit struct {
	Hash      Revision
	Author    Signature
	Committer Signature
	Message   string
	// Parents are the parent commits, first parent first; more than one
	// makes a merge.
	Parents []Revision
}

// Time is when the commit was made (the committer's time: for a merged
// pull request, the time of the merge).
func (c Commit) Time() time.Time { return c.Committer.When }

// IsMerge reports whether the commit has more than one parent.
func (c Commit) IsMerge() bool { return len(c.Parents) > 1 }

var (
	// mergePR is the subject of GitHub's merge commit.
	mergePR = regexp.MustCompile(`^Merge pull request #([0-9]+) from `)
	// squashPR is the end of the subject of a squashed or rebased pull
	// request: "Approve control-plane (#7)".
	squashPR = regexp.MustCompile(`\(#([0-9]+)\)$`)
)

// PullRequest returns the number of the pull request that a commit merged,
// from GitHub's messages: "Merge pull request #N from ..." for a merge
// commit, "Title (#N)" for a squash merge. It is what the message says,
// not a look-up: ask the forge for the merger.
func (c Commit) PullRequest() (int, bool) {
	subject, _, _ := strings.Cut(c.Message, "\n")
	subject = strings.TrimSpace(subject)
	m := mergePR.FindStringSubmatch(subject)
	if m == nil {
		m = squashPR.FindStringSubmatch(subject)
	}
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return 0, false
	}
	return n, true
}

// What marks ferry's own commits (status write-back). The committing code
// must use these, and the reconciler ignores commits that carry either, so
// that ferry's writes do not start a loop of reconciles.
const (
	FerryAuthorEmail = "ferry@ferry.invalid"
	StatusTrailer    = "Ferry-Status"
)

// IsFerryCommit reports whether c is one of ferry's status commits: its
// author's email is FerryAuthorEmail, or the trailers at the end of its
// message include "Ferry-Status: true".
func IsFerryCommit(c Commit) bool {
	if strings.EqualFold(c.Author.Email, FerryAuthorEmail) {
		return true
	}
	for _, t := range trailers(c.Message) {
		if strings.EqualFold(t[0], StatusTrailer) && strings.EqualFold(t[1], "true") {
			return true
		}
	}
	return false
}

// trailers returns the "Key: value" lines of a message's last paragraph,
// as Git reads trailers; the subject line is never one.
func trailers(msg string) [][2]string {
	msg = strings.TrimSpace(strings.ReplaceAll(msg, "\r\n", "\n"))
	i := strings.LastIndex(msg, "\n\n")
	if i < 0 {
		return nil
	}
	var out [][2]string
	sc := bufio.NewScanner(strings.NewReader(msg[i+2:]))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			continue
		}
		out = append(out, [2]string{k, strings.TrimSpace(v)})
	}
	return out
}

func toCommit(c *object.Commit) Commit {
	parents := make([]Revision, len(c.ParentHashes))
	for i, p := range c.ParentHashes {
		parents[i] = Revision(p.String())
	}
	return Commit{
		Hash:      Revision(c.Hash.String()),
		Author:    Signature{Name: c.Author.Name, Email: c.Author.Email, When: c.Author.When},
		Committer: Signature{Name: c.Committer.Name, Email: c.Committer.Email, When: c.Committer.When},
		Message:   c.Message,
		Parents:   parents,
	}
}

// Commit returns the commit rev from the cache.
func (s *Source) Commit(rev Revision) (Commit, error) {
	h, err := rev.hash()
	if err != nil {
		return Commit{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.commit(h)
	if err != nil {
		return Commit{}, err
	}
	return toCommit(c), nil
}

// commit reads a commit. Callers hold s.mu.
func (s *Source) commit(h plumbing.Hash) (*object.Commit, error) {
	c, err := object.GetCommit(s.repo.Storer, h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return nil, fmt.Errorf("commit %s: %w", Revision(h.String()).Short(), ErrUnknownRevision)
	}
	if err != nil {
		return nil, fmt.Errorf("read commit %s: %w", Revision(h.String()).Short(), err)
	}
	return c, nil
}

// Introduced finds the commit that brought the file at path into its
// current state, where "state" is whatever match says: starting at rev it
// walks the first-parent history (the branch as it was merged to, not the
// commits of merged pull requests) while the file exists and matches, and
// returns the oldest commit of that run. For a plan whose spec.approve was
// raised by merging a pull request, that is the merge commit.
//
// It fails with an error wrapping fs.ErrNotExist when the file is missing
// at rev and with ErrNoMatch when it does not match there. match is called
// without any lock held, once per distinct content of the file.
func (s *Source) Introduced(ctx context.Context, rev Revision, path string, match func(content []byte) bool) (Commit, error) {
	h, err := rev.hash()
	if err != nil {
		return Commit{}, err
	}
	if !fs.ValidPath(path) || path == "." {
		return Commit{}, fmt.Errorf("introduced %s at %s: %w", path, rev.Short(), fs.ErrInvalid)
	}
	var (
		found     *object.Commit
		lastBlob  plumbing.Hash
		lastMatch bool
	)
	for {
		if err := ctx.Err(); err != nil {
			return Commit{}, fmt.Errorf("introduced %s at %s: %w", path, rev.Short(), err)
		}
		c, blob, content, err := s.fileAt(h, path, lastBlob)
		if err != nil {
			return Commit{}, fmt.Errorf("introduced %s at %s: %w", path, rev.Short(), err)
		}
		if blob.IsZero() {
			if found == nil {
				return Commit{}, fmt.Errorf("introduced %s at %s: %w", path, rev.Short(), fs.ErrNotExist)
			}
			break
		}
		// The same blob gives the same answer: match runs once per
		// content, not once per commit.
		if blob != lastBlob {
			lastBlob, lastMatch = blob, match(content)
		}
		if !lastMatch {
			if found == nil {
				return Commit{}, fmt.Errorf("introduced %s at %s: %w", path, rev.Short(), ErrNoMatch)
			}
			break
		}
		found = c
		if len(c.ParentHashes) == 0 {
			break
		}
		h = c.ParentHashes[0]
	}
	return toCommit(found), nil
}

// fileAt reads commit h and the blob of path in it: the zero hash when
// path is not a file there, and the content unless the blob is known.
func (s *Source) fileAt(h plumbing.Hash, path string, known plumbing.Hash) (*object.Commit, plumbing.Hash, []byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.commit(h)
	if err != nil {
		return nil, plumbing.ZeroHash, nil, err
	}
	n, found, err := findNode(s, c.TreeHash, path)
	if err != nil {
		return nil, plumbing.ZeroHash, nil, fmt.Errorf("find %s in %s: %w", path, Revision(h.String()).Short(), err)
	}
	if !found || !n.isFile() {
		return c, plumbing.ZeroHash, nil, nil
	}
	if n.hash == known {
		return c, n.hash, nil, nil
	}
	content, err := readBlob(s, n.hash)
	if err != nil {
		return nil, plumbing.ZeroHash, nil, fmt.Errorf("read %s in %s: %w", path, Revision(h.String()).Short(), err)
	}
	return c, n.hash, content, nil
}

// Content is where the state of a set of files at a revision came from,
// as Changed finds it: Commit brought the files into the state they have
// at Rev. Passed back to Changed for the same paths at a later revision,
// it ends the walk at Rev when the files did not change since.
type Content struct {
	Rev    Revision
	Commit Commit
	// Digest names the state: the blob of each path (none for a missing
	// file), in the order of the paths, hashed.
	Digest string
}

// Changed finds the commit that brought the files at paths into the state
// they have at rev: walking rev's first-parent history while every path
// has the blob it has at rev (a missing file is a state too), it returns
// the oldest commit of that run, the last to change any of them. A file
// that did not exist when the history began counts as changed by the
// first commit. known, an earlier answer for the same paths, ends the walk
// at known.Rev when the files did not change between it and rev, so that
// each new revision costs the commits since the last one. No blob is read:
// states are compared by hash.
func (s *Source) Changed(ctx context.Context, rev Revision, paths []string, known Content) (Content, error) {
	h, err := rev.hash()
	if err != nil {
		return Content{}, err
	}
	for _, p := range paths {
		if !fs.ValidPath(p) || p == "." {
			return Content{}, fmt.Errorf("changed %s at %s: %w", p, rev.Short(), fs.ErrInvalid)
		}
	}
	var (
		want  []plumbing.Hash
		found *object.Commit
	)
	for {
		if err := ctx.Err(); err != nil {
			return Content{}, fmt.Errorf("changed %s at %s: %w", strings.Join(paths, ", "), rev.Short(), err)
		}
		c, blobs, err := s.blobsAt(h, paths)
		if err != nil {
			return Content{}, fmt.Errorf("changed %s at %s: %w", strings.Join(paths, ", "), rev.Short(), err)
		}
		if want == nil {
			want = blobs
		} else if !slices.Equal(blobs, want) {
			break
		}
		found = c
		if known.Rev != "" && string(known.Rev) == c.Hash.String() && known.Digest == digest(want) {
			return Content{Rev: rev, Commit: known.Commit, Digest: known.Digest}, nil
		}
		if len(c.ParentHashes) == 0 {
			break
		}
		h = c.ParentHashes[0]
	}
	return Content{Rev: rev, Commit: toCommit(found), Digest: digest(want)}, nil
}

// blobsAt reads commit h and the blob of each path in it (the zero hash
// for a path that is not a file there).
func (s *Source) blobsAt(h plumbing.Hash, paths []string) (*object.Commit, []plumbing.Hash, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.commit(h)
	if err != nil {
		return nil, nil, err
	}
	blobs := make([]plumbing.Hash, len(paths))
	for i, p := range paths {
		n, found, err := findNode(s, c.TreeHash, p)
		if err != nil {
			return nil, nil, fmt.Errorf("find %s in %s: %w", p, Revision(h.String()).Short(), err)
		}
		if found && n.isFile() {
			blobs[i] = n.hash
		}
	}
	return c, blobs, nil
}

// digest names a state of files: the hash of their blobs' hashes.
func digest(blobs []plumbing.Hash) string {
	sum := sha256.New()
	for _, b := range blobs {
		sum.Write(b[:])
	}
	return hex.EncodeToString(sum.Sum(nil))
}

// Descends reports whether ancestor is rev or one of its ancestors (along
// every parent, not only the first); false when ancestor is not a commit
// the cache holds, as after a force-push that left it behind.
func (s *Source) Descends(rev, ancestor Revision) (bool, error) {
	if rev == ancestor {
		return true, nil
	}
	h, err := rev.hash()
	if err != nil {
		return false, err
	}
	a, err := ancestor.hash()
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	anc, err := s.commit(a)
	if errors.Is(err, ErrUnknownRevision) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	c, err := s.commit(h)
	if err != nil {
		return false, err
	}
	return anc.IsAncestor(c)
}
