package plan

import (
	"fmt"
	"strings"
)

// EnrootURI is InferenceX's enroot_uri (docs/compat-spec.md §16.5).
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
