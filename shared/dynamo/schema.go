package dynamo

// Schema is what a table definition needs to know of the storage layout:
// the key attributes, the sparse sweep index and the TTL attribute. The
// CDK construct (infra/batchwork) builds the table from it, so the table
// and the code that reads it cannot disagree.
var Schema = struct {
	PartitionKey, SortKey string
	// DueIndex is keyed by DueShard (string) and Due (number), keys only.
	DueIndex, DueShard, Due string
	// TTL holds the epoch second after which DynamoDB may delete an item
	// (idempotency records).
	TTL string
}{attrPK, attrSK, DueIndex, attrGPK, attrDue, aTTL}
