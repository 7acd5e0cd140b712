package dynamo

// Attributes that describe who ran an attempt and since when.
const (
	// aClaimed is when the task's current attempt was claimed (task
	// records: written by the claim's own update, so it costs no write).
	aClaimed = "clm"
	// aAttStart is when an ended attempt was claimed (attempt-end records,
	// with aExecutor: the executor that ran it).
	aAttStart = "ast"
)
