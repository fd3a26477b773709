package shard

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// StagedBinary finds the opx binary built for the runner's platform.
func StagedBinary(imagePlatform, amd64, arm64 string) (string, error) {
	plat, given, flag, name := "linux/amd64", amd64, "--opx-binary", "opx-linux-amd64" // any other platform: amd64's
	if imagePlatform == "linux/arm64" {
		plat, given, flag, name = imagePlatform, arm64, "--opx-binary-arm64", "opx-linux-arm64"
	}
	if given != "" {
		return given, nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	if imagePlatform == "linux/"+runtime.GOARCH {
		return self, nil
	}
	p := filepath.Join(filepath.Dir(self), name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("this runner needs the %s opx binary: put %s beside %s or pass %s (scripts/release.sh builds it)",
			plat, name, self, flag)
	}
	return p, nil
}
