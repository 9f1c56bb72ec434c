package upgrade

// Status is a record as the upgrade commands print it with -o: the record,
// the name of its plan, where in the plan the upgrade is, and what may come
// next.
type Status struct {
	*Record
	// PlanName is the plan's name (upgrade-plan show --current prints it).
	PlanName string `json:"plan"`
	// Step is the 1-based position of the state's step in the plan's steps:
	// 0 at the start and in the abort branch, Steps+1 from complete on.
	Step  int     `json:"step"`
	Steps int     `json:"steps"`
	Next  []State `json:"next"`
}

// Status says where in its plan the upgrade is.
func (r *Record) Status() Status {
	p := r.plan()
	step, steps := p.Position(r.State)
	next := p.Allowed(r.State)
	if next == nil {
		next = []State{}
	}
	return Status{Record: r, PlanName: p.Name, Step: step, Steps: steps, Next: next}
}
