package shard

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// StagedBinary finds the opx binary built for the runner's platform.
func StagedBinary(imagePlatform, amd64, arm64 string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	want := "linux/" + runtime.GOARCH
	switch imagePlatform {
	case "linux/arm64":
		if arm64 != "" {
			return arm64, nil
		}
		if want == imagePlatform {
			return self, nil
		}
		p := filepath.Join(filepath.Dir(self), "opx-linux-arm64")
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("this runner needs the linux/arm64 opx binary: put opx-linux-arm64 beside %s or pass --opx-binary-arm64 (scripts/release.sh builds it)", self)
		}
		return p, nil
	default:
		if amd64 != "" {
			return amd64, nil
		}
		if want == imagePlatform {
			return self, nil
		}
		p := filepath.Join(filepath.Dir(self), "opx-linux-amd64")
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("this runner needs the linux/amd64 opx binary: put opx-linux-amd64 beside %s or pass --opx-binary", self)
		}
		return p, nil
	}
}
