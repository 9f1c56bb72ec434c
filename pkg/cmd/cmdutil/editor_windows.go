package cmdutil

// stopInTheBackground: Windows has no background jobs to stop;
// proc.ForegroundTerminal never finds one.
func stopInTheBackground() {}
