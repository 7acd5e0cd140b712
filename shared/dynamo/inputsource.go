package dynamo

// aInSource is the index of the stage's input a task's split was listed
// under (split.Split.Source), written only when it is not 0, so a stage
// with one input writes the records it always did. It is at most two
// digits (spec.MaxInputs), within the record's budget beside the key
// (TestTaskItemUnder1KB counts it).
const aInSource = "ix"
