package dynamo

// Attributes of a task record that say how its attempts end and where
// they run.
const (
	// aErrClass is the domain.ErrorClass of the task's last error (err),
	// written with it by the release or sweep that recorded it.
	aErrClass = "ecl"
	// aMemory is the executor size, in bytes, the task's next attempt
	// runs on, when an out-of-memory retry raised it above its stage's
	// size; absent otherwise.
	aMemory = "mem"
)
