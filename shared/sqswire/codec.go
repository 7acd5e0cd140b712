package sqswire

import "github.com/batchwork/batchwork/shared/awswire/wirejson"

// enc and dec are the shared JSON codec's, with this client's own
// members (its operations' shapes) as methods beside it.
type (
	enc struct{ wirejson.Enc }
	dec struct{ wirejson.Dec }
)
