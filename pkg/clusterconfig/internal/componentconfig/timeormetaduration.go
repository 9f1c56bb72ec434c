package componentconfig

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TimeOrMetaDuration mirrors k8s.io/component-base/logs/api/v1.TimeOrMetaDuration
// (LoggingConfiguration.flushFrequency), by hand: it decodes with its own
// code, a duration string or a number of nanoseconds. UnmarshalJSON is the
// original's (Copyright 2021 The Kubernetes Authors, Apache License 2.0),
// errors included; a test compares the two on strings, numbers and other
// JSON values.
type TimeOrMetaDuration struct {
	// Duration holds the duration
	Duration metav1.Duration
	// SerializeAsString controls whether the value is serialized as a string or an integer
	SerializeAsString bool `json:"-"`
}

// UnmarshalJSON decodes a duration string as metav1.Duration and anything
// else as a time.Duration, as the original does.
func (t *TimeOrMetaDuration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		// string values unmarshal as metav1.Duration
		t.SerializeAsString = true
		return json.Unmarshal(b, &t.Duration)
	}
	t.SerializeAsString = false
	if err := json.Unmarshal(b, &t.Duration.Duration); err != nil {
		return fmt.Errorf("invalid duration %q: %w", string(b), err)
	}
	return nil
}
