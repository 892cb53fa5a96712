package image

import (
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
)

// The SBOM is CycloneDX 1.5 JSON: the image, each binary in it, and the Go
// modules each binary was linked from, read from the build information the
// Go toolchain embeds in every binary (debug/buildinfo), so it lists what
// was built, not what go.mod would resolve today. No timestamp: the same
// binaries give the same document.

// CycloneDX is the part of a CycloneDX 1.5 BOM chatguard writes.
type CycloneDX struct {
	BOMFormat    string       `json:"bomFormat"`
	SpecVersion  string       `json:"specVersion"`
	Version      int          `json:"version"`
	Metadata     BOMMetadata  `json:"metadata"`
	Components   []Component  `json:"components"`
	Dependencies []Dependency `json:"dependencies"`
}

// BOMMetadata names what the BOM describes.
type BOMMetadata struct {
	Component Component `json:"component"`
}

// Component is the image, a binary or a Go module.
type Component struct {
	Type    string     `json:"type"`
	BOMRef  string     `json:"bom-ref"`
	Name    string     `json:"name"`
	Version string     `json:"version,omitempty"`
	PURL    string     `json:"purl,omitempty"`
	Props   []Property `json:"properties,omitempty"`
}

// Property is a name-value pair (the Go version a binary was built with,
// a module's go.sum hash).
type Property struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Dependency lists what one component is made of.
type Dependency struct {
	Ref       string   `json:"ref"`
	DependsOn []string `json:"dependsOn"`
}

// SBOM reads the build information of each of Binaries in binDir and
// returns the image's CycloneDX document. It fails when a binary is missing
// or carries no Go build information.
func SBOM(binDir string, s Stamp) ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("image: sbom: %w", err)
	}
	bom := CycloneDX{BOMFormat: "CycloneDX", SpecVersion: "1.5", Version: 1,
		Metadata: BOMMetadata{Component: Component{Type: "container", BOMRef: "chatguard", Name: "chatguard", Version: s.Version,
			Props: []Property{{Name: "org.opencontainers.image.revision", Value: s.Revision}}}}}
	modules := map[string]Component{}
	image := Dependency{Ref: "chatguard"}
	for _, b := range Binaries {
		bi, err := buildinfo.ReadFile(filepath.Join(binDir, b))
		if err != nil {
			return nil, fmt.Errorf("image: sbom: %s: %w", b, err)
		}
		ref := "binary:" + b
		bom.Components = append(bom.Components, Component{Type: "application", BOMRef: ref, Name: "/" + b, Version: s.Version,
			Props: []Property{{Name: "go.version", Value: bi.GoVersion}, {Name: "go.path", Value: bi.Path}}})
		image.DependsOn = append(image.DependsOn, ref)
		dep := Dependency{Ref: ref}
		for _, m := range bi.Deps {
			if m.Replace != nil {
				m = m.Replace
			}
			purl := "pkg:golang/" + m.Path + "@" + m.Version
			if _, ok := modules[purl]; !ok {
				c := Component{Type: "library", BOMRef: purl, Name: m.Path, Version: m.Version, PURL: purl}
				if m.Sum != "" {
					// go.sum's h1: hash is base64, not the hex CycloneDX
					// hashes take: a property.
					c.Props = []Property{{Name: "go.sum", Value: m.Sum}}
				}
				modules[purl] = c
			}
			dep.DependsOn = append(dep.DependsOn, purl)
		}
		sort.Strings(dep.DependsOn)
		bom.Dependencies = append(bom.Dependencies, dep)
	}
	purls := make([]string, 0, len(modules))
	for p := range modules {
		purls = append(purls, p)
	}
	sort.Strings(purls)
	for _, p := range purls {
		bom.Components = append(bom.Components, modules[p])
	}
	bom.Dependencies = append([]Dependency{image}, bom.Dependencies...)
	out, err := json.MarshalIndent(bom, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("image: sbom: %w", err)
	}
	return append(out, '\n'), nil
}
