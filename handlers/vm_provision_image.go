package handlers

import (
	"cmp"
	"context"
	"slices"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/proxmox"
)

// fileStorageTypes are the storage types that keep files, where Proxmox can hold `import`
// content. ESXi storages list `import` too but are not file stores.
var fileStorageTypes = []string{"dir", "nfs", "cifs", "cephfs", "glusterfs", "btrfs"}

// importStorage finds an active, enabled, file-based storage with content import on node.
func importStorage(inv []proxmox.StorageStatus, node string) (proxmox.StorageStatus, bool) {
	for _, st := range inv {
		if st.Node == node && st.Enabled && st.Active && slices.Contains(st.Content, "import") && slices.Contains(fileStorageTypes, st.Type) {
			return st, true
		}
	}
	return proxmox.StorageStatus{}, false
}

// diskStorage is where the new VM's disk goes: the asked storage, else the first enabled and
// active storage of the node that holds VM images.
func diskStorage(inv []proxmox.StorageStatus, in ProvisionInput) (string, bool) {
	if in.Storage != "" {
		return in.Storage, true
	}
	for _, st := range inv {
		if st.Node == in.TargetNode && st.Enabled && st.Active && slices.Contains(st.Content, "images") {
			return st.Storage, true
		}
	}
	return "", false
}

// importImage is import_image: Proxmox downloads the image into an import storage (reused when
// already there), or the node downloads it over SSH; the VM is created with its disk imported.
func (p *provision) importImage(ctx context.Context, inv []proxmox.StorageStatus) *Outcome {
	in, img := p.in, p.in.Source.Image
	p.step(ctx, stepCloneTemplate, events.StepSkipped, "", "")
	dest, ok := diskStorage(inv, in)
	if !ok {
		p.step(ctx, stepImportImage, events.StepError, "", "no storage for VM images on the target node")
		out := p.fail(Outcome{Status: 409, Result: ResultRefused, Reason: ReasonTargetStorageUnavailable, Fields: []string{"storage"},
			Detail: "the target node has no enabled, active storage for VM images"})
		return &out
	}
	var source string
	if st, ok := importStorage(inv, in.TargetNode); ok {
		if ext, importable := proxmox.ImageFormat(img.URL); importable {
			var out *Outcome
			if source, out = p.downloadByProxmox(ctx, st.Storage, ext); out != nil {
				return out
			}
		}
	}
	if source == "" {
		var out *Outcome
		if source, out = p.downloadOverSSH(ctx); out != nil {
			return out
		}
	}
	params := map[string]string{
		"name":   in.NewName,
		"scsihw": "virtio-scsi-pci",
		"scsi0":  dest + ":0,import-from=" + source,
		"boot":   "order=scsi0",
		"net0":   renderNIC("", ExtraNetwork{Model: defaultNICModel, Bridge: cmp.Or(in.Bridge, "vmbr0"), VLANTag: in.VLANTag}),
		"agent":  boolDigit(in.EnableAgent),
	}
	upid, err := p.write(ctx, stepImportImage, "creating the VM with the imported disk", func(ctx context.Context) (string, error) {
		return p.x.Proxmox.CreateVM(ctx, in.TargetNode, in.NewVMID, params)
	})
	p.out.ImportUPID = upid
	if err != nil {
		return p.writeFailed(err)
	}
	return nil
}

// downloadByProxmox has Proxmox fetch the image (checksum verified) into storage's import
// content, named after the sha256 of the URL, unless it is already there. It returns the
// import-from source.
func (p *provision) downloadByProxmox(ctx context.Context, storage, ext string) (string, *Outcome) {
	in, img := p.in, p.in.Source.Image
	file := proxmox.ImportFileName(img.URL, ext)
	source := storage + ":import/" + file
	vols, err := p.x.Proxmox.StorageContent(ctx, in.TargetNode, storage, "import")
	if err != nil {
		return "", p.failed(ctx, stepImportImage, err)
	}
	for _, v := range vols {
		if v.VolID == source {
			p.step(ctx, stepImportImage, events.StepDone, "", "image already in "+storage+"; reused")
			return source, nil
		}
	}
	upid, err := p.write(ctx, stepImportImage, "Proxmox downloads the image into "+storage, func(ctx context.Context) (string, error) {
		return p.x.Proxmox.DownloadURL(ctx, in.TargetNode, storage, proxmox.DownloadRequest{
			URL: img.URL, Filename: file, Checksum: img.Checksum, ChecksumAlgorithm: img.ChecksumAlgorithm,
		})
	})
	p.out.DownloadUPID = upid
	if err != nil {
		return "", p.writeFailed(err)
	}
	return source, nil
}

// downloadOverSSH is the fallback: the node downloads and verifies the image into
// proxmox.FallbackImageDir. It returns the absolute path to import from.
func (p *provision) downloadOverSSH(ctx context.Context) (string, *Outcome) {
	in, img := p.in, p.in.Source.Image
	ssh := p.x.Proxmox.Endpoint().SSH
	if !ssh.Enabled() {
		p.step(ctx, stepImportImage, events.StepError, "", "no import storage and no SSH access configured")
		out := p.fail(Outcome{Status: 409, Result: ResultRefused, Reason: ReasonTargetStorageUnavailable,
			Detail: "the target node has no storage with content import for this image type, and the endpoint has no SSH access configured"})
		return "", &out
	}
	host, err := p.x.Proxmox.NodeAddress(ctx, in.TargetNode)
	if err != nil {
		return "", p.failed(ctx, stepImportImage, err)
	}
	var path string
	_, err = p.write(ctx, stepImportImage, "the node downloads the image over SSH", func(ctx context.Context) (string, error) {
		sh, err := p.x.Proxmox.NodeShell(ctx, host)
		if err != nil {
			return "", err
		}
		path, err = proxmox.DownloadOverSSH(ctx, sh, img.URL, img.Checksum, img.ChecksumAlgorithm)
		return "", err
	})
	if err != nil {
		return "", p.writeFailed(err)
	}
	return path, nil
}
