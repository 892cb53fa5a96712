package eval

import (
	"cmp"
	"slices"
	"strings"
)

// clustering assigns every labelled case to a cluster: cases sharing a
// room, an account or a campaign land in one (the connected components of
// "shares a key with"), so that the coarsest grouping the set knows of is
// what the intervals resample. A case without a room is its own cluster.
type clustering struct {
	of   map[string]int // case id → cluster
	n    int
	name string // what the report says it clustered by
}

func clusterCases(cases []Case) clustering {
	parent := map[string]string{}
	var find func(string) string
	find = func(x string) string {
		if parent[x] == "" || parent[x] == x {
			parent[x] = x
			return x
		}
		r := find(parent[x])
		parent[x] = r
		return r
	}
	union := func(a, b string) {
		ra, rb := find(a), find(b)
		if ra != rb {
			// The smaller name wins, so that the clusters' order does
			// not depend on the cases' order.
			if rb < ra {
				ra, rb = rb, ra
			}
			parent[rb] = ra
		}
	}
	var keys []string
	seen := map[string]bool{}
	for _, c := range cases {
		if c.Truth == nil || seen[c.ID] {
			continue
		}
		seen[c.ID] = true
		node := "c\x00" + c.ID
		find(node)
		for i, k := range []string{c.RoomID, c.Account, c.Campaign} {
			if k == "" {
				continue
			}
			if !slices.Contains(keys, keyNames[i]) {
				keys = append(keys, keyNames[i])
			}
			union(node, keyNames[i]+"\x00"+k)
		}
	}
	roots := map[string]int{}
	var ids []string
	for id := range seen {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	cl := clustering{of: map[string]int{}}
	type pair struct{ id, root string }
	var ps []pair
	for _, id := range ids {
		ps = append(ps, pair{id, find("c\x00" + id)})
	}
	slices.SortStableFunc(ps, func(a, b pair) int { return cmp.Compare(a.root, b.root) })
	for _, p := range ps {
		k, ok := roots[p.root]
		if !ok {
			k = len(roots)
			roots[p.root] = k
		}
		cl.of[p.id] = k
	}
	cl.n = len(roots)
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(slices.Index(keyNames, a), slices.Index(keyNames, b)) })
	switch len(keys) {
	case 0:
		cl.name = "case (the set names no room_id: its cases are taken as independent)"
	case 1:
		cl.name = keys[0]
	default:
		cl.name = strings.Join(keys[:len(keys)-1], ", ") + " and " + keys[len(keys)-1] + " (cases sharing any of them form one cluster)"
	}
	return cl
}

// keyNames are the cluster keys, finest first.
var keyNames = []string{"room", "account", "campaign"}
