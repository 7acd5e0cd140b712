package dynamo

// MaxInputKeyBytes bounds an input object's key and its pin (PinBytes)
// together on a task record. It is what is left of one write unit (1 KB)
// once every other attribute a task may carry is at its longest (the
// error at control.MaxErrorLen, its class, the executor size, the
// checkpoint reference, the tolerated mark): a task record that outgrows
// 1 KB bills two WCUs on every claim, heartbeat and commit. S3 allows
// 1,024-byte keys; a longer input key is refused at planning with an error
// naming it (TestTaskItemUnder1KB keeps the sum honest).
const MaxInputKeyBytes = 440
