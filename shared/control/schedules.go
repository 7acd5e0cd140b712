package control

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/batchwork/batchwork/shared/batch"
	"github.com/batchwork/batchwork/shared/control/admission"
	"github.com/batchwork/batchwork/shared/control/schedules"
	"github.com/batchwork/batchwork/shared/control/stages"
	"github.com/batchwork/batchwork/shared/spec"
)

// Schedules and their firings live in schedules; these names keep their
// callers' spelling.
type (
	ScheduleView = schedules.ScheduleView
	ScheduleList = schedules.ScheduleList
	ScheduleRun  = schedules.ScheduleRun
	RunList      = schedules.RunList
	FireCounts   = schedules.FireCounts
	TimerOutcome = schedules.TimerOutcome
)

// What FireTimer did with a message (schedules.TimerOutcome).
const (
	TimerFired        = schedules.TimerFired
	TimerAlreadyFired = schedules.TimerAlreadyFired
	TimerDropped      = schedules.TimerDropped
	TimerHandedBack   = schedules.TimerHandedBack
)

// TimerWindow is how far ahead the sweep hands firings off.
const TimerWindow = schedules.TimerWindow

var (
	// ScheduleIDPattern is the form of a schedule id.
	ScheduleIDPattern = schedules.ScheduleIDPattern
	// ErrNotTimer: a message is not a timer message.
	ErrNotTimer = schedules.ErrNotTimer
)

// NewScheduleID returns a schedule id that sorts by creation time.
func NewScheduleID() string { return schedules.NewScheduleID() }

// CreateSchedule validates a schedule document and stores it
// (schedules.Firer.CreateSchedule).
func (s *Service) CreateSchedule(ctx context.Context, owner string, body []byte) (ScheduleView, error) {
	return s.firer.CreateSchedule(ctx, owner, body)
}

// GetSchedule returns one of the owner's schedules.
func (s *Service) GetSchedule(ctx context.Context, owner, id string) (ScheduleView, error) {
	return s.firer.GetSchedule(ctx, owner, id)
}

// ListSchedules lists the owner's schedules.
func (s *Service) ListSchedules(ctx context.Context, owner string, limit int, cursor string) (ScheduleList, error) {
	return s.firer.ListSchedules(ctx, owner, limit, cursor)
}

// PauseSchedule stops a schedule's firings until it is resumed.
func (s *Service) PauseSchedule(ctx context.Context, owner, id string) (ScheduleView, error) {
	return s.firer.PauseSchedule(ctx, owner, id)
}

// ResumeSchedule lets a paused schedule fire again from now on.
func (s *Service) ResumeSchedule(ctx context.Context, owner, id string) (ScheduleView, error) {
	return s.firer.ResumeSchedule(ctx, owner, id)
}

// DeleteSchedule deletes a schedule; its jobs and run history are kept.
func (s *Service) DeleteSchedule(ctx context.Context, owner, id string) error {
	return s.firer.DeleteSchedule(ctx, owner, id)
}

// ScheduleRuns lists a schedule's history, newest first.
func (s *Service) ScheduleRuns(ctx context.Context, owner, id string, limit int, cursor string) (RunList, error) {
	return s.firer.ScheduleRuns(ctx, owner, id, limit, cursor)
}

// FireDue fires the schedules whose index entries are due at now.
func (s *Service) FireDue(ctx context.Context, now time.Time) (FireCounts, error) {
	return s.firer.FireDue(ctx, now)
}

// HandOffTimers hands the firings due within TimerWindow to the timer
// queue and returns how many it sent.
func (s *Service) HandOffTimers(ctx context.Context, now time.Time) (int, error) {
	return s.firer.HandOffTimers(ctx, now)
}

// FireTimer handles one timer message (schedules.Firer.FireTimer).
func (s *Service) FireTimer(ctx context.Context, body string) (TimerOutcome, error) {
	return s.firer.FireTimer(ctx, body)
}

// FireTimers handles a batch of timer queue messages at once, so one
// message's wait does not delay another, and returns each one's error
// (nil: done with, delete it; ErrNotTimer: never valid, delete it too).
func (s *Service) FireTimers(ctx context.Context, bodies []string) []error {
	errs := make([]error, len(bodies))
	var wg sync.WaitGroup
	for i, body := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.timerMessage(ctx, body) // a firing, or a relay (stages/relay.go)
		}()
	}
	wg.Wait()
	return errs
}

// firingAdmission is what the schedules ask of admission, answered by
// admission's submit and checks, and the service's cancel.
type firingAdmission struct{ s *Service }

var _ schedules.Admission = firingAdmission{}

var _ schedules.Store = Store(nil)

var _ schedules.Queue = Queue(nil)

func (a firingAdmission) CheckOwner(owner string) error { return admission.CheckOwner(owner) }

func (a firingAdmission) CheckScheduleSpec(ctx context.Context, owner string, sp *spec.Job) error {
	return a.s.admit.CheckScheduleSpec(ctx, owner, sp)
}

func (a firingAdmission) SubmitFiring(ctx context.Context, f schedules.Firing) (schedules.Submitted, error) {
	guard := f.Guard
	res, created, err := a.s.admit.SubmitFiring(ctx, SubmitRequest{Owner: f.Owner, IdempotencyKey: f.IdempotencyKey, Spec: f.Spec}, &guard)
	return schedules.Submitted{JobID: res.JobID, Created: res.Created, CreatedAt: created}, err
}

func (a firingAdmission) CancelPrevious(ctx context.Context, owner, job string) error {
	if _, err := a.s.Cancel(ctx, owner, job); err != nil && !errors.Is(err, ErrJobEnded) && !errors.Is(err, batch.ErrNotFound) {
		return err
	}
	return nil
}

// timerMessage handles one message of the timer queue: a relay or
// a handed-off firing (FireTimer).
func (s *Service) timerMessage(ctx context.Context, body string) error {
	if r, ok := stages.ParseRelay(body); ok {
		return s.MaterializeRelay(ctx, r)
	}
	_, err := s.FireTimer(ctx, body)
	return err
}
