package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// The faults the test injects, one episode at a time: each is applied,
// held for a random while, and undone (a killed node restarts, a partition
// heals) before a quiet gap and the next.
const (
	faultKill            = "kill"             // SIGKILL a node, restart it later
	faultPartitionMinor  = "partition-minor"  // cut a random minority off from the rest
	faultPartitionLeader = "partition-leader" // cut the leader off from everyone
	faultDropOneWay      = "drop-one-way"     // drop what one node sends to another, one direction only
	faultDelay           = "delay"            // delay every link
	faultWipe            = "wipe"             // remove a node, wipe its data, add it back: it rejoins from a snapshot
)

var faultKinds = []string{faultKill, faultPartitionMinor, faultPartitionLeader, faultDropOneWay, faultDelay, faultWipe}

// faulter draws faults from the run's seed.
type faulter struct {
	c      *cluster
	rng    *rand.Rand
	counts map[string]int
	wiped  map[int]bool // nodes wiped and re-added (each must restore a snapshot)
	t0     time.Time
}

func (f *faulter) logf(format string, args ...any) {
	f.c.logf("%7.2fs  "+format, append([]any{time.Since(f.t0).Seconds()}, args...)...)
}

// between is a random duration in [lo, hi).
func (f *faulter) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(f.rng.Int64N(int64(hi-lo)))
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// run injects faults until ctx is done, and leaves the cluster healed with
// every node running.
func (f *faulter) run(ctx context.Context) error {
	for ctx.Err() == nil {
		sleep(ctx, f.between(300*time.Millisecond, time.Second))
		if ctx.Err() != nil {
			break
		}
		kind := faultKinds[f.rng.IntN(len(faultKinds))]
		if err := f.episode(ctx, kind); err != nil {
			return fmt.Errorf("fault %s: %w", kind, err)
		}
	}
	return nil
}

func (f *faulter) episode(ctx context.Context, kind string) error {
	n := len(f.c.procs)
	hold := f.between(500*time.Millisecond, 2500*time.Millisecond)
	switch kind {
	case faultKill:
		i := f.rng.IntN(n)
		f.logf("kill -9 %s, restart in %v", f.c.procs[i].cfg.ID, hold.Round(time.Millisecond))
		if err := f.c.kill(i, false); err != nil {
			return err
		}
		sleep(ctx, hold)
		if err := f.c.start(i, false); err != nil {
			return err
		}
	case faultPartitionMinor, faultPartitionLeader:
		var minority []int
		if kind == faultPartitionLeader {
			if l := f.c.leader(); l >= 0 {
				minority = []int{l}
			}
		}
		if minority == nil {
			perm := f.rng.Perm(n)
			minority = perm[:1+f.rng.IntN((n-1)/2)]
		}
		rest := without(f.c.all(), minority)
		f.logf("%s: %s | %s for %v", kind, f.ids(minority), f.ids(rest), hold.Round(time.Millisecond))
		f.c.setLinks(minority, rest, Link{Cut: f.rng.IntN(2) == 0, Drop: true})
		sleep(ctx, hold)
		f.c.heal()
	case faultDropOneWay:
		i, j := f.rng.IntN(n), f.rng.IntN(n-1)
		if j >= i {
			j++
		}
		f.logf("drop %s -> %s for %v", f.c.procs[i].cfg.ID, f.c.procs[j].cfg.ID, hold.Round(time.Millisecond))
		f.c.proxies[i][j].SetLink(Link{Drop: true})
		sleep(ctx, hold)
		f.c.proxies[i][j].SetLink(Link{})
	case faultDelay:
		d := f.between(5*time.Millisecond, 60*time.Millisecond)
		f.logf("delay every link by %v for %v", d.Round(time.Millisecond), hold.Round(time.Millisecond))
		all := f.c.all()
		f.c.setLinks(all, all, Link{Delay: d})
		sleep(ctx, hold)
		f.c.heal()
	case faultWipe:
		return f.wipe(f.rng.IntN(n))
	default:
		return errors.New("unknown fault")
	}
	f.counts[kind]++
	return nil
}

// wipe takes node i out of the configuration, deletes its data, starts it
// empty and adds it back: the leader, whose log was just compacted by a
// snapshot, sends it that snapshot. The node's vote history went with its
// data, so it must not rejoin as the same voter without the removal.
//
// The steps are not cut short when the run's time is up: a node left out
// of the configuration would not converge.
func (f *faulter) wipe(i int) error {
	ctx := context.Background()
	id := f.c.procs[i].cfg.ID
	f.logf("wipe %s: remove, delete its data, add back", id)
	if err := f.c.admin(ctx, "/remove?id="+id); err != nil {
		return err
	}
	if err := f.c.kill(i, false); err != nil {
		return err
	}
	if err := f.c.wipe(i); err != nil {
		return err
	}
	// Compact the leader's log so that the node needs a snapshot. The
	// followers' logs too: one of them may lead by the time the node is
	// added back.
	if err := f.c.admin(ctx, "/snapshot"); err != nil {
		return err
	}
	f.c.snapshotFollowers(i)
	if err := f.c.start(i, false); err != nil {
		return err
	}
	if err := f.c.admin(ctx, "/add?id="+id+"&addr="+f.c.procs[i].cfg.RaftAddr); err != nil {
		return err
	}
	f.wiped[i] = true
	f.counts[faultWipe]++
	return nil
}

func (f *faulter) ids(nodes []int) string {
	s := ""
	for k, i := range nodes {
		if k > 0 {
			s += ","
		}
		s += f.c.procs[i].cfg.ID
	}
	return s
}

func without(all, drop []int) []int {
	var out []int
	for _, i := range all {
		keep := true
		for _, d := range drop {
			keep = keep && i != d
		}
		if keep {
			out = append(out, i)
		}
	}
	return out
}
