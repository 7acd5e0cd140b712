package control

// CanCheckpoint says, before an attempt starts, whether its checkpoints can
// be recorded: nil, or ErrNoCheckpoints when the store cannot record them.
// The executor gives attempts a checkpointer only when it can
// (executor.Checkpointer), so none is offered checkpoint outputs it could
// never save.
func (s *Service) CanCheckpoint() error {
	_, err := s.checkpoints()
	return err
}
