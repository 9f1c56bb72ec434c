//go:build !linux

package upgrade

// LocalProcesses names nothing off Linux: no process record made here can
// be checked, and the audit and retries rely on the heartbeat alone.
func LocalProcesses() Processes { return Processes{} }

func groupState(Process) CommandState { return CommandUnknown }

func startTicks(int) (uint64, bool) { return 0, false }
