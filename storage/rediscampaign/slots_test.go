package rediscampaign

import (
	"strings"
)

// crc16 is Redis Cluster's key hash (CRC-16/XMODEM), written here from the
// cluster specification so the test does not trust the code it checks.
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

// slot is the cluster slot of a key: the hash of its first non-empty {tag}
// if it has one, of the whole key otherwise.
func slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16([]byte(key)) % 16384)
}
