package proxmox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
)

// FallbackImageDir is where the SSH fallback puts images on a node.
const FallbackImageDir = "/var/lib/vz/template/proxbus-images"

// ErrInvalidImage: the image URL, checksum or algorithm cannot be used; nothing was run.
var ErrInvalidImage = errors.New("proxmox: invalid image source")

// FallbackImagePath is the absolute path [DownloadOverSSH] uses for rawURL on a node:
// FallbackImageDir/<hex sha256 of the full URL><original extension>, the extension being
// everything from the first dot of the URL path's last element (".img", ".qcow2.xz", …;
// none when it has no dot).
func FallbackImagePath(rawURL string) string {
	sum := sha256.Sum256([]byte(rawURL))
	ext := ""
	if u, err := url.Parse(rawURL); err == nil {
		base := path.Base(u.Path)
		if i := strings.IndexByte(base, '.'); i > 0 {
			ext = base[i:]
		}
	}
	if !safeExt.MatchString(ext) {
		ext = ""
	}
	return FallbackImageDir + "/" + hex.EncodeToString(sum[:]) + strings.ToLower(ext)
}

// safeExt is an extension that needs no shell quoting and cannot leave the directory.
var safeExt = regexp.MustCompile(`^(\.[A-Za-z0-9_-]{1,16}){0,4}$`)

// hexChecksum is a checksum as the coreutils tools print it.
var hexChecksum = regexp.MustCompile(`^[0-9a-f]+$`)

// DownloadOverSSH downloads rawURL on the node behind sh into [FallbackImagePath] and
// returns that absolute path. The commands it runs, in order:
//
//	mkdir -p -- DIR
//	<algo>sum -- FILE               (exists with the right checksum → done, nothing downloaded)
//	rm -f -- FILE                   (it existed with a wrong checksum)
//	wget -q -O FILE.part -- URL     (on failure: rm -f -- FILE.part)
//	<algo>sum -- FILE.part          (mismatch: rm -f -- FILE.part → ErrChecksumMismatch)
//	mv -f -- FILE.part FILE
//
// with every argument single-quoted; <algo>sum is md5sum, sha1sum, sha224sum, sha256sum,
// sha384sum or sha512sum. rawURL must be http(s) without user info (commands never carry
// secrets), checksum hex of the algorithm's length: otherwise [ErrInvalidImage] before any
// command. Errors: [ErrChecksumMismatch] (the file was removed), a command's error
// ([ErrShellCommand], …) wrapped.
func DownloadOverSSH(ctx context.Context, sh NodeShell, rawURL, checksum, algorithm string) (string, error) {
	algo := strings.ToLower(algorithm)
	sum := strings.ToLower(strings.TrimSpace(checksum))
	if err := checkImageSource(rawURL, sum, algo); err != nil {
		return "", err
	}
	file := FallbackImagePath(rawURL)
	part := file + ".part"
	tool := algo + "sum"
	if _, err := sh.Run(ctx, shellJoin("mkdir", "-p", "--", FallbackImageDir)); err != nil {
		return "", fmt.Errorf("proxmox: image download over ssh: %w", err)
	}
	got, present, err := remoteChecksum(ctx, sh, tool, file)
	if err != nil {
		return "", err
	}
	if present && got == sum {
		return file, nil
	}
	if present {
		if _, err := sh.Run(ctx, shellJoin("rm", "-f", "--", file)); err != nil {
			return "", fmt.Errorf("proxmox: image download over ssh: remove stale file: %w", err)
		}
	}
	if _, err := sh.Run(ctx, shellJoin("wget", "-q", "-O", part, "--", rawURL)); err != nil {
		_, _ = sh.Run(context.WithoutCancel(ctx), shellJoin("rm", "-f", "--", part))
		return "", fmt.Errorf("proxmox: image download over ssh: %w", err)
	}
	got, present, err = remoteChecksum(ctx, sh, tool, part)
	if err == nil && !present {
		err = fmt.Errorf("proxmox: image download over ssh: %s vanished after the download", part)
	}
	if err == nil && got != sum {
		err = fmt.Errorf("%w: got %s, expected %s", ErrChecksumMismatch, got, sum)
	}
	if err != nil {
		if _, rmErr := sh.Run(context.WithoutCancel(ctx), shellJoin("rm", "-f", "--", part)); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("proxmox: image download over ssh: remove %s: %w", part, rmErr))
		}
		return "", err
	}
	if _, err := sh.Run(ctx, shellJoin("mv", "-f", "--", part, file)); err != nil {
		return "", fmt.Errorf("proxmox: image download over ssh: %w", err)
	}
	return file, nil
}

// checksumLen is the hex length of each algorithm's digest.
var checksumLen = map[string]int{"md5": 32, "sha1": 40, "sha224": 56, "sha256": 64, "sha384": 96, "sha512": 128}

// checkImageSource validates what DownloadOverSSH puts into commands.
func checkImageSource(rawURL, sum, algo string) error {
	u, err := url.Parse(rawURL)
	switch {
	case err != nil:
		return fmt.Errorf("%w: unparsable URL", ErrInvalidImage)
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		return fmt.Errorf("%w: the URL must be http(s) with a host", ErrInvalidImage)
	case u.User != nil:
		return fmt.Errorf("%w: the URL must not contain credentials", ErrInvalidImage)
	case !slices.Contains(ChecksumAlgorithms(), algo):
		return fmt.Errorf("%w: unsupported checksum algorithm %q", ErrInvalidImage, algo)
	case len(sum) != checksumLen[algo] || !hexChecksum.MatchString(sum):
		return fmt.Errorf("%w: the checksum is not a hex %s digest", ErrInvalidImage, algo)
	}
	return nil
}

// remoteChecksum runs "<tool> -- file": present is false when the tool fails (the file
// does not exist or cannot be read); other failures (connection) are errors.
func remoteChecksum(ctx context.Context, sh NodeShell, tool, file string) (sum string, present bool, err error) {
	out, err := sh.Run(ctx, shellJoin(tool, "--", file))
	if errors.Is(err, ErrShellCommand) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("proxmox: image download over ssh: %w", err)
	}
	fields := strings.Fields(out)
	if len(fields) == 0 {
		return "", false, fmt.Errorf("proxmox: image download over ssh: %s printed no checksum", tool)
	}
	return strings.ToLower(strings.TrimPrefix(fields[0], `\`)), true, nil
}

// shellJoin renders argv as a POSIX shell command line, every argument single-quoted
// except plain options and command names.
func shellJoin(argv ...string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if i == 0 || plainWord.MatchString(a) {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}

// plainWord needs no quoting.
var plainWord = regexp.MustCompile(`^-[A-Za-z-]+$|^--$`)
