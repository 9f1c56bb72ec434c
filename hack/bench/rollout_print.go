package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// The rollout bench's tables, with the targets beside the figures.

const (
	handoffTarget = time.Second     // healthy -> next node started
	rolloutSlack  = 3 * time.Second // rollout vs three reconfigure runs
	idleCPUTarget = 0.5             // percent of a core
	idleRSSTarget = 40 << 10        // KiB
)

func printRollout(rounds []round, idle []idleAgent, versions int, watches map[string]int) {
	fmt.Printf("one kube-apiserver flag carried to 3 kubeadm control-plane nodes (stacked etcd, real kube-apiserver v1.37.2, "+
		"the plugin built as released), %d alternating rounds\n", len(rounds))

	fmt.Printf("\nhand-offs: from one node's agent finding its node healthy to the next node's start in the record (target: at most %s)\n\n", handoffTarget)
	fmt.Println("| round | hand-off | healthy -> outcome recorded | -> next agent acts | -> next node started (render, plan, BeginNode) | healthy -> next started |")
	fmt.Println("|---|---|---|---|---|---|")
	var worst time.Duration
	for i, r := range rounds {
		for _, h := range r.handoffs {
			total := h.started.Sub(h.healthy)
			worst = max(worst, total)
			fmt.Printf("| %d | %s -> %s | %s | %s | %s | %s |\n", i+1, h.from, h.to, ms(h.recorded.Sub(h.healthy)),
				ms(h.acting.Sub(h.recorded)), ms(h.started.Sub(h.acting)), ms(total))
		}
	}
	fmt.Printf("\nmax healthy -> next started: %s (target %s: %s)\n", ms(worst), handoffTarget, verdict(worst <= handoffTarget))

	fmt.Printf("\nthe whole change: `rollout start --wait` against three `reconfigure` runs one after the other (target: at most the sum + %s)\n\n", rolloutSlack)
	fmt.Println("| round | rollout start --wait | reconfigure cp-0 + cp-1 + cp-2 | difference |")
	fmt.Println("|---|---|---|---|")
	var rolls, sums []time.Duration
	for i, r := range rounds {
		var sum time.Duration
		var parts []string
		for _, d := range r.reconfigure {
			sum += d
			parts = append(parts, sec(d))
		}
		rolls, sums = append(rolls, r.rollout), append(sums, sum)
		fmt.Printf("| %d | %s | %s = %s | %s |\n", i+1, sec(r.rollout), strings.Join(parts, " + "), sec(sum), signed(r.rollout-sum))
	}
	mRoll, mSum := median(rolls), median(sums)
	fmt.Printf("| median | %s | %s | %s |\n", sec(mRoll), sec(mSum), signed(mRoll-mSum))
	fmt.Printf("\nmedian difference %s (target at most +%s: %s)\n", signed(mRoll-mSum), rolloutSlack, verdict(mRoll-mSum <= rolloutSlack))

	elapsed := idle[0].elapsed
	fmt.Printf("\nan idle agent over %s (CPU from /proc/PID/stat utime+stime; memory from /proc/PID/status at the end; target: CPU under %.1f%% of a core, RSS at most %d MiB)\n\n",
		elapsed.Round(time.Second), idleCPUTarget, idleRSSTarget>>10)
	fmt.Println("| node | CPU (% of a core) | VmRSS | RssAnon | RssFile | VmHWM (peak) | threads | major faults |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	var cpuOK, rssOK = true, true
	for _, a := range idle {
		cpuOK = cpuOK && a.cpu < idleCPUTarget
		rssOK = rssOK && a.end.rss <= idleRSSTarget
		fmt.Printf("| %s | %.3f%% | %s | %s | %s | %s | %d | %d |\n", a.node, a.cpu, mib(a.end.rss), mib(a.end.anon), mib(a.end.file),
			mib(a.end.hwm), a.end.threads, a.end.majFaults-a.start.majFaults)
	}
	fmt.Printf("\nCPU: %s; RSS: %s; versions of the rollout record meanwhile: %d\n", verdict(cpuOK), verdict(rssOK), versions)
	fmt.Printf("metrics: each agent scraped %d times in the idle period, every %s as a Prometheus would, %d bytes a scrape\n",
		idle[0].scrapes, scrapeEvery, idle[0].scraped)
	var held []string
	total := 0
	for _, r := range slices.Sorted(maps.Keys(watches)) {
		held = append(held, fmt.Sprintf("%s %d", r, watches[r]))
		total += watches[r]
	}
	fmt.Printf("watches the %d agents hold (kube-apiserver's apiserver_longrunning_requests, verb WATCH, summed over the 3 API servers, with the agents less without): %s; %.1f per agent\n",
		len(idle), strings.Join(held, ", "), float64(total)/float64(len(idle)))
}

func ms(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return sec(d)
}

func sec(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

func signed(d time.Duration) string {
	if d >= 0 {
		return "+" + sec(d)
	}
	return sec(d)
}

func mib(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}
