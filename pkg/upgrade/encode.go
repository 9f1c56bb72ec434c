package upgrade

import (
	"encoding/json"
	"strings"

	"github.com/kubeadmcfg/kubectl-kubeadmcfg/pkg/exitcode"
)

// The record as annotations on the state ConfigMap, within their size limit.

// Decode reads a record from annotations. ok is false when there is no
// upgrade state at all. An upgrade recorded before plans existed is read
// with the default plan, which is stored with its next change.
func Decode(annotations map[string]string) (rec *Record, ok bool, err error) {
	state, ok := annotations[KeyState]
	if !ok {
		return nil, false, nil
	}
	rec = &Record{
		State: State(state), FromVersion: annotations[KeyFromVersion], ToVersion: annotations[KeyToVersion],
		UpdatedAt: annotations[KeyUpdatedAt], Reason: annotations[KeyReason],
		Hosts: map[string]Host{}, History: []Transition{}, Runners: []Runner{},
	}
	if v := annotations[KeyHosts]; v != "" {
		if err := json.Unmarshal([]byte(v), &rec.Hosts); err != nil {
			return nil, true, exitcode.Invalidf("annotation %s is not a JSON object of hosts: %w", KeyHosts, err)
		}
	}
	if v := annotations[KeyHistory]; v != "" {
		if err := json.Unmarshal([]byte(v), &rec.History); err != nil {
			return nil, true, exitcode.Invalidf("annotation %s is not a JSON list of transitions: %w", KeyHistory, err)
		}
	}
	if v := annotations[KeyRunners]; v != "" {
		if err := json.Unmarshal([]byte(v), &rec.Runners); err != nil {
			return nil, true, exitcode.Invalidf("annotation %s is not a JSON list of runners: %w", KeyRunners, err)
		}
	}
	if v := annotations[KeyLostRunners]; v != "" {
		if err := json.Unmarshal([]byte(v), &rec.Lost); err != nil {
			return nil, true, exitcode.Invalidf("annotation %s is not a JSON list of runners: %w", KeyLostRunners, err)
		}
	}
	if rec.Agents, err = decodeAgents(annotations); err != nil {
		return nil, true, err
	}
	if v, stored := annotations[KeyPlan]; stored {
		dec := json.NewDecoder(strings.NewReader(v))
		dec.DisallowUnknownFields()
		var p Plan
		if err := dec.Decode(&p); err != nil {
			return nil, true, exitcode.Invalidf("annotation %s is not a plan this plugin knows (update the plugin?): %w", KeyPlan, err)
		}
		if err := p.Validate(); err != nil {
			return nil, true, exitcode.Invalidf("annotation %s: %w", KeyPlan, err)
		}
		rec.Plan = &p
	} else {
		if rec.Plan, err = Builtin(DefaultPlan); err != nil {
			return nil, true, err
		}
	}
	return rec, true, nil
}

// plan is the plan the record follows.
func (r *Record) plan() *Plan {
	if r.Plan == nil {
		r.Plan, _ = Builtin(DefaultPlan) // embedded and tested: it cannot fail
	}
	return r.Plan
}

// PlanOf returns the plan the record follows.
func (r *Record) PlanOf() *Plan { return r.plan() }

// Encode writes the record into annotations, the plan with it. The history
// is shortened, oldest first, when the annotations would pass the API
// server's limit; if even that is not enough, nothing is to be written and
// the error says what to remove.
func (r *Record) Encode(annotations map[string]string) error {
	if len(r.History) > HistoryLength {
		r.History = r.History[len(r.History)-HistoryLength:]
	}
	plan, _ := json.Marshal(r.plan())
	hosts, _ := json.Marshal(r.Hosts)
	runners, _ := json.Marshal(nonNil(r.Runners))
	annotations[KeyState] = string(r.State)
	annotations[KeyFromVersion] = r.FromVersion
	annotations[KeyToVersion] = r.ToVersion
	annotations[KeyUpdatedAt] = r.UpdatedAt
	annotations[KeyReason] = r.Reason
	annotations[KeyHosts] = string(hosts)
	annotations[KeyRunners] = string(runners)
	if len(r.Lost) > 0 {
		lost, _ := json.Marshal(r.Lost)
		annotations[KeyLostRunners] = string(lost)
	} else {
		delete(annotations, KeyLostRunners)
	}
	annotations[KeyPlan] = string(plan)
	if r.Agents != nil {
		agents, _ := json.Marshal(r.Agents)
		annotations[KeyApply] = string(agents)
	} else {
		delete(annotations, KeyApply)
	}
	for {
		history, _ := json.Marshal(nonNil(r.History))
		annotations[KeyHistory] = string(history)
		size := annotationBytes(annotations)
		if size <= MaxAnnotationBytes {
			return nil
		}
		if len(r.History) == 0 {
			return exitcode.Invalidf("the upgrade state would take %d bytes of annotations, over the API server's limit of %d, "+
				"even without history (%d hosts take %d bytes, the plan %d, other annotations %d); nothing was written: "+
				"remove the entries of hosts that are done with 'upgrade-host NODE none'",
				size, MaxAnnotationBytes, len(r.Hosts), len(hosts), len(plan), size-ownBytes(annotations))
		}
		// Drop the oldest entries, about as many as the excess needs.
		drop := max(1, min(len(r.History), (size-MaxAnnotationBytes)*len(r.History)/max(1, len(history))+1))
		r.History = r.History[drop:]
	}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func annotationBytes(a map[string]string) int {
	n := 0
	for k, v := range a {
		n += len(k) + len(v)
	}
	return n
}

func ownBytes(a map[string]string) int {
	n := 0
	for k, v := range a {
		if strings.HasPrefix(k, Prefix) {
			n += len(k) + len(v)
		}
	}
	return n
}
