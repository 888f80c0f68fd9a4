package nearest

import (
	"sort"
	"strings"
)

// Score says how close candidate is to name, lower being closer, and
// whether it is close enough to suggest at all. Case never counts. A
// candidate equal but for case scores 0; one that starts with the other
// (at least three characters of it) scores below any typo; otherwise the
// edit distance decides, up to a third of the shorter name (at most 4),
// so that short names do not suggest everything of their length.
func Score(name, candidate string) (score int, ok bool) {
	a, b := strings.ToLower(name), strings.ToLower(candidate)
	if a == b {
		return 0, true
	}
	short := min(len(a), len(b))
	d := Distance(a, b)
	if short >= 3 && (strings.HasPrefix(a, b) || strings.HasPrefix(b, a)) {
		return 1 + min(d, 99), true
	}
	if d <= max(1, min(short/3, 4)) {
		return 100 + d, true
	}
	return 0, false
}

// Names returns up to n of known that are close enough to name (Score),
// closest first; ties keep alphabetical order. Duplicates in known are
// returned once.
func Names(name string, known []string, n int) []string {
	type scored struct {
		name  string
		score int
	}
	var list []scored
	seen := map[string]bool{}
	for _, k := range known {
		if seen[k] {
			continue
		}
		seen[k] = true
		if s, ok := Score(name, k); ok {
			list = append(list, scored{k, s})
		}
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].score != list[j].score {
			return list[i].score < list[j].score
		}
		return list[i].name < list[j].name
	})
	out := make([]string, 0, min(n, len(list)))
	for _, s := range list[:min(n, len(list))] {
		out = append(out, s.name)
	}
	return out
}

// Distance is the Levenshtein distance between a and b, counted in
// bytes: the number of single-byte insertions, deletions and
// substitutions that turn one into the other.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
