// Package clusterslot computes Redis Cluster's hash slot of a key, written
// from the cluster specification, so that tests of the Cluster-ready key
// layouts (storage/redisdebounce, storage/rediscampaign) check the slots
// their scripts touch without trusting the code they check.
package clusterslot

import "strings"

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// crc16 is Redis Cluster's key hash, CRC-16/XMODEM.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// Of is the cluster slot of key: the hash of its first non-empty {tag}
// if it has one, of the whole key otherwise.
func Of(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16([]byte(key)) % Slots)
}
