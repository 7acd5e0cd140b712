package tasks

// CanCheckpoint says, before an attempt starts, whether its checkpoints can
// be recorded. Every Store records checkpoints (the port is complete), so
// the in-process control plane always can; the method is part of the
// executor's port because other control planes may not (they answer
// executor.ErrUnsupported or ErrNoCheckpoints).
func (s *Lifecycle) CanCheckpoint() error { return nil }
