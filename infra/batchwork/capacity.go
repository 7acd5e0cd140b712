package batchwork

// Capacity the operator controls (issue 31): the HTTP API's throttle, the
// table's warm throughput and the Lambda executors' reserved concurrency.
// Each setting is checked at synth, and its zero value synthesizes the
// stack as it is without it, except the API throttle, whose default is
// the 250 submits a second the task-scheduler design asks for.

import (
	"fmt"
	"math"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/jsii-runtime-go"
)

const (
	// DefaultAPIRateLimit and DefaultAPIBurstLimit are the HTTP API
	// stage's steady request rate and burst when Props leaves them 0.
	DefaultAPIRateLimit  = 250
	DefaultAPIBurstLimit = 500
	// MinWarmReadUnits and MinWarmWriteUnits are what a new on-demand
	// table serves from its creation (AWS: "Understanding DynamoDB warm
	// throughput"); a table's warm throughput cannot be set below them.
	MinWarmReadUnits  = 12000
	MinWarmWriteUnits = 4000
	// MaxCapacitySetting bounds every capacity setting: CloudFormation
	// carries them as 32-bit integers.
	MaxCapacitySetting = math.MaxInt32
	// readyQueueCount is how many ready queues the default Lambda
	// executor polls (High, Normal, Low), each with its own event source
	// capped at ExecutorMaxConcurrency.
	readyQueueCount = 3
)

// withCapacity fills the capacity settings' defaults and panics, naming
// the field and its allowed range, on a value AWS would refuse at deploy
// or one that would throttle the executors.
func withCapacity(p Props) Props {
	if p.APIRateLimit == 0 {
		p.APIRateLimit = DefaultAPIRateLimit
	}
	if p.APIBurstLimit == 0 {
		p.APIBurstLimit = max(DefaultAPIBurstLimit, p.APIRateLimit)
	}
	if p.APIRateLimit < 1 || p.APIRateLimit > MaxCapacitySetting {
		panic(fmt.Sprintf("batchwork: APIRateLimit %d: must be between 1 and %d", p.APIRateLimit, MaxCapacitySetting))
	}
	// A burst below the rate would cap the rate at the burst.
	if p.APIBurstLimit < p.APIRateLimit || p.APIBurstLimit > MaxCapacitySetting {
		panic(fmt.Sprintf("batchwork: APIBurstLimit %d: must be between APIRateLimit (%d) and %d", p.APIBurstLimit, p.APIRateLimit, MaxCapacitySetting))
	}
	checkWarm("TableWarmReadUnitsPerSecond", p.TableWarmReadUnitsPerSecond, MinWarmReadUnits)
	checkWarm("TableWarmWriteUnitsPerSecond", p.TableWarmWriteUnitsPerSecond, MinWarmWriteUnits)
	if r := p.ExecutorReservedConcurrency; r != 0 {
		if p.Executor == ExecutorFargate {
			panic("batchwork: ExecutorReservedConcurrency: must be 0 when Executor is fargate (no Lambda executor runs)")
		}
		// AWS: a function's reserved concurrency at least the sum of its
		// SQS event sources' maximum concurrency, or Lambda throttles
		// their messages back onto the queues.
		lo := readyQueueCount * p.ExecutorMaxConcurrency
		if r < lo || r > MaxCapacitySetting {
			panic(fmt.Sprintf("batchwork: ExecutorReservedConcurrency %d: must be 0 (unreserved) or between %d (%d ready queues × ExecutorMaxConcurrency %d) and %d",
				r, lo, readyQueueCount, p.ExecutorMaxConcurrency, MaxCapacitySetting))
		}
	}
	return p
}

func checkWarm(field string, units, lo int) {
	if units != 0 && (units < lo || units > MaxCapacitySetting) {
		panic(fmt.Sprintf("batchwork: %s %d: must be 0 (AWS's default) or between %d and %d", field, units, lo, MaxCapacitySetting))
	}
}

// apiThrottle is the HTTP API stage's default route throttle.
func apiThrottle(p Props) *awsapigatewayv2.ThrottleSettings {
	return &awsapigatewayv2.ThrottleSettings{RateLimit: jsii.Number(float64(p.APIRateLimit)), BurstLimit: jsii.Number(float64(p.APIBurstLimit))}
}

// tableWarmThroughput is the table's WarmThroughput; nil when neither
// side is set, so the table keeps AWS's default.
func tableWarmThroughput(p Props) *awsdynamodb.WarmThroughput {
	if p.TableWarmReadUnitsPerSecond == 0 && p.TableWarmWriteUnitsPerSecond == 0 {
		return nil
	}
	w := &awsdynamodb.WarmThroughput{}
	if p.TableWarmReadUnitsPerSecond != 0 {
		w.ReadUnitsPerSecond = jsii.Number(float64(p.TableWarmReadUnitsPerSecond))
	}
	if p.TableWarmWriteUnitsPerSecond != 0 {
		w.WriteUnitsPerSecond = jsii.Number(float64(p.TableWarmWriteUnitsPerSecond))
	}
	return w
}

// reservedConcurrency is the reserved concurrent executions of a function
// of kind name: ExecutorReservedConcurrency for every Lambda executor
// (the default one and each larger size's), nil (unreserved) otherwise.
func reservedConcurrency(p Props, name string) *float64 {
	if name != FnExecutor || p.ExecutorReservedConcurrency == 0 {
		return nil
	}
	return jsii.Number(float64(p.ExecutorReservedConcurrency))
}
