package consumer

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
)

// StoredSchedule is a schedule as the commands stream holds it.
type StoredSchedule struct {
	events.Schedule
	// Made is when the stream stored it.
	Made time.Time
}

// Schedules adds, removes and lists the message schedules of contract §11 on the commands
// stream of Subjects (one message per schedule on Subjects.Schedule(name); nats-server fires it
// to the command subject of its verb).
type Schedules struct {
	JS       jetstream.JetStream
	Subjects events.Subjects
}

// Add stores sc, replacing the schedule of its name. It does not validate sc (internal/schedule.Validate does).
func (s Schedules) Add(ctx context.Context, sc events.Schedule) error {
	m, err := events.EncodeSchedule(s.Subjects, sc)
	if err != nil {
		return err
	}
	if _, err := s.JS.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("schedule %s: publish: %w", sc.Name, err)
	}
	return nil
}

// Remove deletes the schedule named name and reports whether there was one.
func (s Schedules) Remove(ctx context.Context, name string) (bool, error) {
	st, err := s.JS.Stream(ctx, s.Subjects.CommandsStream())
	if err != nil {
		return false, fmt.Errorf("schedule %s: %w", name, err)
	}
	subject := s.Subjects.Schedule(name)
	if _, err := st.GetLastMsgForSubject(ctx, subject); errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("schedule %s: %w", name, err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
		return false, fmt.Errorf("schedule %s: purge: %w", name, err)
	}
	return true, nil
}

// List returns the schedules, sorted by name; a message under the schedule subjects that is
// not a proxbus schedule is left out.
func (s Schedules) List(ctx context.Context) ([]StoredSchedule, error) {
	st, err := s.JS.Stream(ctx, s.Subjects.CommandsStream())
	if err != nil {
		return nil, fmt.Errorf("schedules: %w", err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(s.Subjects.ScheduleFilter()))
	if err != nil {
		return nil, fmt.Errorf("schedules: %w", err)
	}
	out := make([]StoredSchedule, 0, len(info.State.Subjects))
	for subject := range info.State.Subjects {
		raw, err := st.GetLastMsgForSubject(ctx, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // removed meanwhile
		} else if err != nil {
			return nil, fmt.Errorf("schedules: %s: %w", subject, err)
		}
		sc, err := events.DecodeSchedule(s.Subjects, raw.Subject, raw.Header, raw.Data)
		if err != nil {
			continue
		}
		out = append(out, StoredSchedule{Schedule: sc, Made: raw.Time})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Names returns the names of the schedules the commands stream holds, from the stream's
// information alone (it reads no message: a user allowed $JS.API.STREAM.INFO on the commands
// stream may call it).
func (s Schedules) Names(ctx context.Context) (map[string]bool, error) {
	st, err := s.JS.Stream(ctx, s.Subjects.CommandsStream())
	if err != nil {
		return nil, fmt.Errorf("schedules: %w", err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(s.Subjects.ScheduleFilter()))
	if err != nil {
		return nil, fmt.Errorf("schedules: %w", err)
	}
	names := make(map[string]bool, len(info.State.Subjects))
	for subject := range info.State.Subjects {
		if name, ok := strings.CutPrefix(subject, s.Subjects.Schedule("")); ok {
			names[name] = true
		}
	}
	return names, nil
}
