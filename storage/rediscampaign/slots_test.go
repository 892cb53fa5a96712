package rediscampaign

import "github.com/chatguard/chatguard/internal/clusterslot"

// slot is a key's Redis Cluster slot, computed from the specification.
var slot = clusterslot.Of
