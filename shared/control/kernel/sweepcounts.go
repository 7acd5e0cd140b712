package kernel

// SweepCounts says what one sweep run did.
type SweepCounts struct {
	Examined     int `json:"examined"`
	Requeued     int `json:"requeued"`
	Expired      int `json:"expired"`
	Exhausted    int `json:"exhausted"`
	Cancelled    int `json:"cancelled"`
	StagesFixed  int `json:"stagesFixed"`
	Failures     int `json:"failuresPropagated"`
	DeadLettered int `json:"deadLettered"`
	Errors       int `json:"errors"`
	Fired        int `json:"schedulesFired"`
	HandedOff    int `json:"timersHandedOff"`
	Deadlines    int `json:"deadlinesExceeded"`
	// Events is how many outbox events the sweep published (events.go).
	Events int `json:"eventsPublished"`
	// Speculated is how many speculative copies the sweep launched
	// (speculation.go).
	Speculated int `json:"speculativeCopies"`
	// Counted is how many committed tasks the sweep counted because their
	// committer had not (dynamo/count.go).
	Counted int `json:"counted"`
}

// Add adds o's counts to c.
func (c *SweepCounts) Add(o SweepCounts) {
	c.Examined += o.Examined
	c.Requeued += o.Requeued
	c.Expired += o.Expired
	c.Exhausted += o.Exhausted
	c.Cancelled += o.Cancelled
	c.StagesFixed += o.StagesFixed
	c.Failures += o.Failures
	c.DeadLettered += o.DeadLettered
	c.Errors += o.Errors
	c.Fired += o.Fired
	c.HandedOff += o.HandedOff
	c.Deadlines += o.Deadlines
	c.Events += o.Events
	c.Speculated += o.Speculated
	c.Counted += o.Counted
}
