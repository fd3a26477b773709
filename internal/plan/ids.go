package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/big"
	"strings"
)

type (
	bigInt   = big.Int
	bigFloat = big.Float
)

// PinnedDigest is the seed's _pinned_digest: the text after the last "@" of a
// digest-pinned reference, else "".
func PinnedDigest(image string) string {
	if !strings.Contains(image, "@sha256:") {
		return ""
	}
	return image[strings.LastIndex(image, "@")+1:]
}

// ImageKey is sha256(image + digest + suffix), the suffix ":<platform>" for non-amd64
// platforms (seed-spec §3.2).
func ImageKey(image, digest, imagePlatform string) string {
	suffix := ""
	if imagePlatform != "linux/amd64" {
		suffix = ":" + imagePlatform
	}
	sum := sha256.Sum256([]byte(image + digest + suffix))
	return hex.EncodeToString(sum[:])
}

// QueueToken is the first 32 hex of sha256("<run_id>:<attempt>:<cell id>") (seed-spec §5.7).
func QueueToken(runID, attempt, id string) string {
	sum := sha256.Sum256([]byte(runID + ":" + attempt + ":" + id))
	return hex.EncodeToString(sum[:])[:32]
}

// MasterPort is 29500 + sha256("<job>:<cell id>") mod 2000 (seed-spec §6 step 11).
func MasterPort(job, id string) int {
	sum := sha256.Sum256([]byte(job + ":" + id))
	n := new(big.Int).SetBytes(sum[:])
	return 29500 + int(new(big.Int).Mod(n, big.NewInt(2000)).Int64())
}

// EnrootURI is InferenceX's enroot_uri (seed-spec §16.5).
func EnrootURI(image string) string {
	image = strings.Replace(image, "#", "/", 1)
	ref, digest := image, ""
	if strings.Contains(image, "@sha256:") {
		i := strings.LastIndex(image, "@")
		ref, digest = image[:i], image[i+1:]
	}
	first, rest, hasSlash := strings.Cut(ref, "/")
	registry, repository := "registry-1.docker.io", ref
	if hasSlash && (strings.ContainsAny(first, ".:") || first == "localhost") {
		registry, repository = first, rest
	}
	if digest == "" {
		if registry == "registry-1.docker.io" {
			return "docker://" + image
		}
		return fmt.Sprintf("docker://%s#%s", registry, repository)
	}
	head, last := "", repository
	if i := strings.LastIndex(repository, "/"); i >= 0 {
		head, last = repository[:i], repository[i+1:]
	}
	last, _, _ = strings.Cut(last, ":")
	repository = last
	if head != "" {
		repository = head + "/" + last
	}
	if registry == "registry-1.docker.io" && !strings.Contains(repository, "/") {
		repository = "library/" + repository
	}
	return fmt.Sprintf("docker://%s#%s:%s", registry, repository, digest)
}

// ValidDigest reports whether d is a sha256 manifest digest: "sha256:" and 64 lowercase hex.
func ValidDigest(d string) bool {
	h, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
