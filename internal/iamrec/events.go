package iamrec

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
)

// KindBus is an EventBridge event bus (Name: the bus name, as the entries
// name it; "default" when they name none).
const KindBus = "bus"

// eventsActions maps an EventBridge call: PutEvents is authorized on each
// bus its entries name.
func eventsActions(input any) []Action {
	in, ok := input.(*eventbridge.PutEventsInput)
	if !ok {
		return nil
	}
	seen := map[string]bool{}
	var acts []Action
	for _, e := range in.Entries {
		name := aws.ToString(e.EventBusName)
		if name == "" {
			name = "default"
		}
		if !seen[name] {
			seen[name] = true
			acts = append(acts, Action{Action: "events:PutEvents", Resource: Resource{Kind: KindBus, Name: name}})
		}
	}
	return acts
}
