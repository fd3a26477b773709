//go:build !linux

package files

func adviseHugePages([]byte) {}
