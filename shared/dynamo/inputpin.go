package dynamo

// aInTag is a task's input ETag (split.Split.ETag), unquoted: the pin its
// reads carry as If-Match (blob.OpenPinned). The key and the tag share
// one budget (control.MaxInputKey), so pinning adds no bytes to the
// largest task record.
const aInTag = "it"

// PinBytes is what an input pin adds to a task record: its attribute's
// name and value. The planner counts it against the key's budget.
func PinBytes(etag string) int {
	if etag == "" {
		return 0
	}
	return len(aInTag) + len(etag)
}
