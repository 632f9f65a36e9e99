package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// StreamConfigs returns the configurations [Provision] applies, in order: the commands stream
// (WorkQueue, file, Nats-Msg-Id dedupe over DuplicateWindow, also holding the message
// schedules under the schedule subjects: AllowMsgSchedules and AllowRollup), the events stream (Limits,
// file, MaxAge EventsMaxAge) and the dead-letter stream (Limits, file, MaxAge DLQMaxAge), as
// contract §1 specifies. Defaults are applied to cfg first.
func StreamConfigs(cfg Config) []jetstream.StreamConfig {
	cfg = cfg.WithDefaults()
	s := cfg.Subjects
	return []jetstream.StreamConfig{
		{
			Name:        s.CommandsStream(),
			Description: "proxbus commands (CloudEvents), consumed once by the proxbus durable, and their schedules",
			Subjects:    []string{s.CommandsFilter(), s.ScheduleFilter()},
			Retention:   jetstream.WorkQueuePolicy,
			Storage:     jetstream.FileStorage,
			Replicas:    cfg.Replicas,
			Duplicates:  cfg.DuplicateWindow,
			// Message schedules (contract §11) need roll-ups: a schedule replaces the one of
			// its name with Nats-Rollup: sub.
			AllowMsgSchedules: true,
			AllowRollup:       true,
		},
		{
			Name:        s.EventsStream(),
			Description: "proxbus step, result and journal events",
			Subjects:    []string{s.EventsFilter()},
			Retention:   jetstream.LimitsPolicy,
			Storage:     jetstream.FileStorage,
			Replicas:    cfg.Replicas,
			MaxAge:      cfg.EventsMaxAge,
			Duplicates:  cfg.DuplicateWindow,
		},
		{
			Name:        s.DLQStream(),
			Description: "proxbus dead letters, secrets redacted",
			Subjects:    []string{s.DLQFilter()},
			Retention:   jetstream.LimitsPolicy,
			Storage:     jetstream.FileStorage,
			Replicas:    cfg.Replicas,
			MaxAge:      cfg.DLQMaxAge,
			Duplicates:  cfg.DuplicateWindow,
		},
	}
}

// ConsumerConfig returns the durable pull consumer's configuration: explicit acks, deliver
// all, AckWait, MaxAckPending, filtered on the command subjects, MaxDeliver -1 (unlimited:
// deliveries are not attempts, see the package doc) and no BackOff (a BackOff would replace
// AckWait and naks ignore it; redeliveries use NakWithDelay instead). Defaults are applied to
// cfg first.
func ConsumerConfig(cfg Config) jetstream.ConsumerConfig {
	cfg = cfg.WithDefaults()
	return jetstream.ConsumerConfig{
		Durable:       cfg.Durable,
		Description:   "proxbus command processors",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: cfg.MaxAckPending,
		FilterSubject: cfg.Subjects.CommandsFilter(),
	}
}

// Provision is [ProvisionWith] with the zero [ProvisionOptions]: it never lowers the durable's
// MaxAckPending or a stream's replica count below what the server has, and discards the
// report.
func Provision(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	_, err := ProvisionWith(ctx, js, cfg, ProvisionOptions{})
	return err
}

// Lowering says what [ProvisionWith] does with a setting the server holds at a higher value
// than the configuration asks for: the durable's MaxAckPending (a cluster of replicas sized
// for N×concurrency) or a stream's replica count (an R3 stream).
type Lowering int

const (
	// KeepHigher keeps the server's value and reports it as kept (the default).
	KeepHigher Lowering = iota
	// RefuseLower applies nothing and returns a [*LowerError] per such setting.
	RefuseLower
	// AllowLower applies the lower value (the operator asked for it explicitly).
	AllowLower
)

// ProvisionOptions tune [ProvisionWith].
type ProvisionOptions struct {
	// MaxAckPending is the policy for the durable's MaxAckPending.
	MaxAckPending Lowering
	// Replicas is the policy for each stream's replica count.
	Replicas Lowering
}

// ErrWouldLower is wrapped by every [*LowerError].
var ErrWouldLower = errors.New("provisioning would lower a setting")

// LowerError is a setting [ProvisionWith] refused to lower under [RefuseLower]. It wraps
// [ErrWouldLower].
type LowerError struct {
	Target    string // "stream PROXBUS_COMMANDS" or "consumer proxbus on PROXBUS_COMMANDS"
	Setting   string // "MaxAckPending" or "Replicas"
	Current   int    // the server's value
	Requested int    // the configuration's value
}

func (e *LowerError) Error() string {
	return fmt.Sprintf("%s: %s is %d on the server; refusing to lower it to %d", e.Target, e.Setting, e.Current, e.Requested)
}

func (e *LowerError) Unwrap() error { return ErrWouldLower }

// Change is one line of what [ProvisionWith] did to a stream or the consumer.
type Change struct {
	// Target is "stream NAME" or "consumer DURABLE on STREAM".
	Target string
	// Setting is the changed field (e.g. "MaxAckPending"), or "" for the whole object:
	// then Old is "" and New is "created (replicas N)" or "created (MaxAckPending N)", or
	// Old == New == "unchanged".
	Setting string
	// Old and New are the values before and after, formatted.
	Old, New string
	// Kept is set when the server's higher value was kept (Old == New, [KeepHigher]).
	Kept bool
}

// String is "TARGET: created (…)", "TARGET: unchanged", "TARGET: SETTING OLD → NEW" or
// "TARGET: SETTING OLD kept (higher than the requested NEW)".
func (c Change) String() string {
	switch {
	case c.Setting == "":
		return c.Target + ": " + c.New
	case c.Kept:
		return fmt.Sprintf("%s: %s %s kept (higher than the requested %s)", c.Target, c.Setting, c.Old, c.New)
	default:
		return fmt.Sprintf("%s: %s %s → %s", c.Target, c.Setting, c.Old, c.New)
	}
}

// ProvisionWith creates or updates the three streams of contract §1 and the durable pull
// consumer, and returns what it changed, one [Change] per setting (or one "created" or
// "unchanged" per object), streams first. It is idempotent: running it twice, or against an
// older configuration, converges on [StreamConfigs] and [ConsumerConfig], except that a
// MaxAckPending or replica count higher on the server is handled as opts says; a durable
// created with a delivery limit loses it. Nothing is applied when a setting is refused: the
// error then joins one [*LowerError] per refused setting. It returns an error wrapping
// config.ErrInvalid for an unusable cfg, or the first JetStream error, wrapped with the stream or
// consumer name; a change the server refuses (e.g. a different retention policy on an
// existing stream) is such an error.
func ProvisionWith(ctx context.Context, js jetstream.JetStream, cfg Config, opts ProvisionOptions) ([]Change, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	type planned struct {
		target  string
		exists  bool
		changes []Change
	}
	var (
		refused []error
		plans   []planned
	)
	streams := StreamConfigs(cfg)
	for i, sc := range streams {
		target := "stream " + sc.Name
		p := planned{target: target}
		s, err := js.Stream(ctx, sc.Name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
		case err != nil:
			return nil, fmt.Errorf("provision stream %s: %w", sc.Name, err)
		default:
			p.exists = true
			old := s.CachedInfo().Config
			if old.Replicas > sc.Replicas {
				switch opts.Replicas {
				case KeepHigher:
					p.changes = append(p.changes, Change{Target: target, Setting: "Replicas", Old: fmt.Sprint(old.Replicas), New: fmt.Sprint(sc.Replicas), Kept: true})
					streams[i].Replicas = old.Replicas
				case RefuseLower:
					refused = append(refused, &LowerError{Target: target, Setting: "Replicas", Current: old.Replicas, Requested: sc.Replicas})
				}
			}
			p.changes = append(p.changes, streamDiff(target, old, streams[i])...)
		}
		plans = append(plans, p)
	}
	cc := ConsumerConfig(cfg)
	ctarget := fmt.Sprintf("consumer %s on %s", cc.Durable, cfg.Subjects.CommandsStream())
	cp := planned{target: ctarget}
	c, err := js.Consumer(ctx, cfg.Subjects.CommandsStream(), cc.Durable)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound), errors.Is(err, jetstream.ErrStreamNotFound):
	case err != nil:
		return nil, fmt.Errorf("provision consumer %s on %s: %w", cc.Durable, cfg.Subjects.CommandsStream(), err)
	default:
		cp.exists = true
		old := c.CachedInfo().Config
		if old.MaxAckPending > cc.MaxAckPending {
			switch opts.MaxAckPending {
			case KeepHigher:
				cp.changes = append(cp.changes, Change{Target: ctarget, Setting: "MaxAckPending", Old: fmt.Sprint(old.MaxAckPending), New: fmt.Sprint(cc.MaxAckPending), Kept: true})
				cc.MaxAckPending = old.MaxAckPending
			case RefuseLower:
				refused = append(refused, &LowerError{Target: ctarget, Setting: "MaxAckPending", Current: old.MaxAckPending, Requested: cc.MaxAckPending})
			}
		}
		cp.changes = append(cp.changes, consumerDiff(ctarget, old, cc)...)
	}
	if len(refused) > 0 {
		return nil, errors.Join(refused...)
	}
	plans = append(plans, cp)

	var out []Change
	for i, sc := range streams {
		if !plans[i].exists || hasApplied(plans[i].changes) {
			if _, err := js.CreateOrUpdateStream(ctx, sc); err != nil {
				return out, fmt.Errorf("provision stream %s: %w", sc.Name, err)
			}
		}
		out = append(out, summarize(plans[i].target, fmt.Sprintf("created (replicas %d)", sc.Replicas), plans[i].exists, plans[i].changes)...)
	}
	if !cp.exists || hasApplied(cp.changes) {
		if _, err := js.CreateOrUpdateConsumer(ctx, cfg.Subjects.CommandsStream(), cc); err != nil {
			return out, fmt.Errorf("provision consumer %s on %s: %w", cc.Durable, cfg.Subjects.CommandsStream(), err)
		}
	}
	return append(out, summarize(ctarget, fmt.Sprintf("created (MaxAckPending %d)", cc.MaxAckPending), cp.exists, cp.changes)...), nil
}

// hasApplied reports whether changes hold one that is not a kept value.
func hasApplied(changes []Change) bool {
	return slices.ContainsFunc(changes, func(c Change) bool { return !c.Kept })
}

// summarize is changes, or the single created or "unchanged" line of target.
func summarize(target, created string, exists bool, changes []Change) []Change {
	switch {
	case !exists:
		return []Change{{Target: target, New: created}}
	case len(changes) == 0:
		return []Change{{Target: target, Old: "unchanged", New: "unchanged"}}
	}
	return changes
}

// differ collects the settings that differ between the server's and the wanted values.
type differ struct {
	target  string
	changes []Change
}

func (d *differ) add(setting string, old, new any) {
	o, n := fmt.Sprint(old), fmt.Sprint(new)
	if o != n {
		d.changes = append(d.changes, Change{Target: d.target, Setting: setting, Old: o, New: n})
	}
}

// streamDiff lists the settings of want (the ones [StreamConfigs] sets) that differ on old.
func streamDiff(target string, old, want jetstream.StreamConfig) []Change {
	d := differ{target: target}
	d.add("Subjects", old.Subjects, want.Subjects)
	d.add("Retention", old.Retention, want.Retention)
	d.add("Storage", old.Storage, want.Storage)
	d.add("Replicas", old.Replicas, want.Replicas)
	d.add("MaxAge", fmtDur(old.MaxAge), fmtDur(want.MaxAge))
	d.add("Duplicates", fmtDur(old.Duplicates), fmtDur(want.Duplicates))
	d.add("Description", fmt.Sprintf("%q", old.Description), fmt.Sprintf("%q", want.Description))
	d.add("AllowMsgSchedules", old.AllowMsgSchedules, want.AllowMsgSchedules)
	d.add("AllowRollup", old.AllowRollup, want.AllowRollup)
	return d.changes
}

// consumerDiff lists the settings of want (the ones [ConsumerConfig] sets) that differ on old.
func consumerDiff(target string, old, want jetstream.ConsumerConfig) []Change {
	d := differ{target: target}
	d.add("AckPolicy", old.AckPolicy, want.AckPolicy)
	d.add("DeliverPolicy", old.DeliverPolicy, want.DeliverPolicy)
	d.add("AckWait", fmtDur(old.AckWait), fmtDur(want.AckWait))
	d.add("MaxDeliver", old.MaxDeliver, want.MaxDeliver)
	d.add("MaxAckPending", old.MaxAckPending, want.MaxAckPending)
	d.add("FilterSubject", old.FilterSubject, want.FilterSubject)
	d.add("BackOff", old.BackOff, want.BackOff)
	d.add("Description", fmt.Sprintf("%q", old.Description), fmt.Sprintf("%q", want.Description))
	return d.changes
}

// fmtDur formats a duration, 0 as "none" (no limit).
func fmtDur(d time.Duration) string {
	if d == 0 {
		return "none"
	}
	return d.String()
}
