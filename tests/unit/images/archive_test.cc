// Zip, tar and tar.gz reading with the path rules and the bomb guards of archive.h.
#include "agent/train/images/archive.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "shared/native/files.h"
#include "tests/unit/images/writers.h"

using namespace gleaner;
using namespace gleaner::images;
using namespace gleaner::images::testing;

namespace {

std::unique_ptr<FileSet> Open(const std::string& bytes, const ArchiveLimits& limits = {}) {
  Result<std::unique_ptr<FileSet>> r = OpenArchive(bytes, limits);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  return std::move(*r);
}

Status OpenError(const std::string& bytes, const ArchiveLimits& limits = {}) {
  Result<std::unique_ptr<FileSet>> r = OpenArchive(bytes, limits);
  REQUIRE(!r.ok());
  return r.status();
}

std::vector<std::string> Paths(const FileSet& f) {
  std::vector<std::string> out;
  for (const ArchiveFile& a : f.files()) out.push_back(a.path);
  return out;
}

std::string ReadAll(const FileSet& f, size_t i) {
  Result<std::string> r = f.Read(i);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  return *r;
}

bool Contains(const Status& s, const std::string& words) {
  return s.message().find(words) != std::string::npos;
}

}  // namespace

TEST_CASE("zip: stored and deflate entries, normalised and sorted paths", "[images][archive]") {
  std::string big(100000, 'x');
  for (size_t i = 0; i < big.size(); i += 7) big[i] = char('a' + i % 26);
  for (bool zip64 : {false, true}) {
    ZipOptions o;
    o.zip64 = zip64;
    std::string zip = WriteZip({{"b/second.txt", "hello", false},
                                {"./a//first.bin", big, true},
                                {"dir/", "", false},
                                {"__MACOSX/._first.bin", "junk", false},
                                {".DS_Store", "junk", false},
                                {"b/.hidden.jpg", "junk", false}},
                               o);
    std::unique_ptr<FileSet> f = Open(zip);
    INFO("zip64 " << zip64);
    CHECK(Paths(*f) == std::vector<std::string>{"a/first.bin", "b/second.txt"});
    CHECK(f->files()[0].size == big.size());
    CHECK(ReadAll(*f, 0) == big);
    CHECK(ReadAll(*f, 1) == "hello");
    Result<std::string> head = f->Read(0, 10);
    REQUIRE(head.ok());
    CHECK(*head == big.substr(0, 10));
    CHECK(f->notes().empty());
  }
}

TEST_CASE("tar: ustar prefix, GNU long names, pax paths, tar.gz", "[images][archive]") {
  const std::string deep = std::string(120, 'd') + "/" + std::string(60, 'f') + ".jpg";
  const std::string longer = std::string(150, 'g') + ".jpg";
  std::string tar = WriteTar({{"./one.txt", "1"},
                              {deep, "22"},
                              {longer, "333", '0', TarEntry::LongName::kGnu},
                              {"pax/" + longer, "4444", '0', TarEntry::LongName::kPax},
                              {"folder/", "", '5'},
                              {".git/config", "junk"}});
  for (const std::string& bytes : {tar, Gzip(tar)}) {
    std::unique_ptr<FileSet> f = Open(bytes);
    CHECK(Paths(*f) == std::vector<std::string>{deep, longer, "one.txt", "pax/" + longer});
    CHECK(ReadAll(*f, 0) == "22");
    CHECK(ReadAll(*f, 1) == "333");
    CHECK(ReadAll(*f, 2) == "1");
    CHECK(ReadAll(*f, 3) == "4444");
  }
}

TEST_CASE("links and special entries are skipped with a note, never followed",
          "[images][archive]") {
  ZipEntry link{"photos/link.jpg", "/etc/passwd", false};
  link.unix_mode = 0120777;
  std::unique_ptr<FileSet> z = Open(WriteZip({link, {"photos/a.jpg", "A", false}}));
  CHECK(Paths(*z) == std::vector<std::string>{"photos/a.jpg"});
  REQUIRE(z->notes().size() == 1);
  CHECK(z->notes()[0] == "photos/link.jpg: symbolic link, not followed");
  std::unique_ptr<FileSet> t =
      Open(WriteTar({{"s.jpg", "", '2', TarEntry::LongName::kNone, "/etc/passwd"},
                     {"h.jpg", "", '1', TarEntry::LongName::kNone, "a.jpg"},
                     {"fifo", "", '6'},
                     {"a.jpg", "A"}}));
  CHECK(Paths(*t) == std::vector<std::string>{"a.jpg"});
  CHECK(t->notes() == std::vector<std::string>{
                          "s.jpg: symbolic link, not followed", "h.jpg: hard link, not followed",
                          "fifo: special file (device, pipe or other), skipped"});
}

TEST_CASE("path traversal and absolute paths are refused, naming the entry", "[images][archive]") {
  for (const std::string name :
       {"../evil.jpg", "photos/../../evil.jpg", "/etc/passwd", "C:/evil.jpg", "a\\..\\b.jpg"}) {
    INFO(name);
    Status z = OpenError(WriteZip({{"ok.jpg", "x", false}, {name, "x", false}}));
    CHECK(z.code() == Code::kInvalidArgument);
    CHECK(Contains(z, "zip entry \"" + name + "\""));
    Status t = OpenError(WriteTar({{name, "x"}}));
    CHECK(Contains(t, "tar entry \"" + name + "\""));
  }
  std::string deep = std::string(150, 'x') + "/../../../etc/passwd";
  CHECK(Contains(OpenError(WriteTar({{deep, "x", '0', TarEntry::LongName::kGnu}})), "leaves"));
  CHECK(Contains(OpenError(WriteTar({{deep, "x", '0', TarEntry::LongName::kPax}})), "leaves"));
  // Even a symbolic link's own name must be safe.
  ZipEntry link{"../link", "x", false};
  link.unix_mode = 0120777;
  CHECK(Contains(OpenError(WriteZip({link})), "path leaves the archive"));
}

TEST_CASE("zip features a dataset does not need are refused by name", "[images][archive]") {
  ZipEntry enc{"secret.jpg", "x", false};
  enc.flags = 1;
  Status e = OpenError(WriteZip({enc}));
  CHECK(Contains(e, "zip entry \"secret.jpg\": encrypted entries are not supported"));
  ZipEntry bz{"b.jpg", "x", false};
  bz.method_override = 12;
  CHECK(Contains(OpenError(WriteZip({bz})), "compression method 12 is not supported"));
  ZipOptions split;
  split.disk = 1;
  CHECK(Contains(OpenError(WriteZip({{"a.jpg", "x"}}, split)), "multi-disk"));
  // Hidden entries are never read, so their oddities do not matter.
  enc.name = "__MACOSX/._secret.jpg";
  CHECK(Open(WriteZip({enc, {"a.jpg", "x"}}))->files().size() == 1);
}

TEST_CASE("zip bombs: declared sizes, ratio and overlapping entries", "[images][archive]") {
  SECTION("a declared size over the per-entry limit is refused before inflating") {
    ZipEntry e{"huge.jpg", "tiny", true};
    e.declared_size = int64_t(3) << 30;  // 3 GiB, still a 32-bit field
    Status s = OpenError(WriteZip({e}));
    CHECK(s.code() == Code::kTooLarge);
    CHECK(Contains(s, "zip entry \"huge.jpg\""));
  }
  SECTION("a compression ratio over the limit") {
    Status s = OpenError(WriteZip({{"zeros.jpg", std::string(4 << 20, '\0'), true}}));
    CHECK(s.code() == Code::kTooLarge);
    CHECK(Contains(s, "zip entry \"zeros.jpg\""));
    CHECK(Contains(s, "ratio"));
  }
  SECTION("total size and entry count") {
    ArchiveLimits l;
    l.max_total_bytes = 10;
    CHECK(OpenError(WriteZip({{"a", "123456"}, {"b", "123456"}}), l).code() == Code::kTooLarge);
    l = ArchiveLimits();
    l.max_entries = 1;
    CHECK(OpenError(WriteZip({{"a", "1"}, {"b", "2"}}), l).code() == Code::kTooLarge);
  }
  SECTION("inflation stops at the declared size") {
    ZipEntry e{"lie.txt", std::string(5000, 'a') + std::string(5000, 'b'), true};
    e.declared_size = 100;
    std::unique_ptr<FileSet> f = Open(WriteZip({e}));
    Result<std::string> r = f->Read(0);
    REQUIRE(!r.ok());
    CHECK(Contains(r.status(), "does not match the declared size"));
  }
  SECTION("entries whose data overlaps another's") {
    ZipEntry inner{"b.jpg", "BBBB", false};
    ZipEntry outer{"a.jpg", ZipLocalRecord(inner), false};
    inner.write_local = false;
    inner.local_offset = 30 + 5;  // a.jpg's data: where b.jpg's local header was copied
    Status s = OpenError(WriteZip({outer, inner}));
    CHECK(Contains(s, "overlap"));
  }
}

TEST_CASE("gzip bombs stop while inflating", "[images][archive]") {
  std::string tar = WriteTar({{"zeros.bin", std::string(8 << 20, '\0')}});
  Status s = OpenError(Gzip(tar));
  CHECK(s.code() == Code::kTooLarge);
  CHECK(Contains(s, "gzip bomb"));
  ArchiveLimits l;
  l.max_ratio = 1u << 20;
  l.max_total_bytes = 1 << 20;
  CHECK(OpenError(Gzip(tar), l).code() == Code::kTooLarge);
}

TEST_CASE("damaged archives are errors", "[images][archive]") {
  std::string zip = WriteZip({{"a.jpg", "hello world, hello world", false}});
  CHECK(OpenError(zip.substr(0, zip.size() - 5)).code() == Code::kCorruption);
  CHECK(OpenError(zip.substr(0, 10)).code() == Code::kCorruption);
  std::string flipped = zip;
  flipped[40] = 'X';  // inside a.jpg's data (it starts at 30 + 5): caught by the CRC when read
  std::unique_ptr<FileSet> f = Open(flipped);
  CHECK(Contains(f->Read(0).status(), "CRC mismatch"));
  std::string tar = WriteTar({{"a.jpg", std::string(2000, 'a')}});
  CHECK(Contains(OpenError(tar.substr(0, 1000)), "truncated"));
  std::string bad_sum = tar;
  bad_sum[0] = 'b';
  CHECK(Contains(OpenError(bad_sum), "checksum"));
  CHECK(Contains(OpenError(Gzip(tar).substr(0, 40)), "gzip data is damaged or truncated"));
  CHECK(Contains(OpenError("just some text, not an archive"), "not a zip or tar archive"));
  CHECK(Contains(OpenError(WriteZip({{"a.jpg", "1"}, {"./a.jpg", "2"}})), "appears twice"));
}

TEST_CASE("empty archives open with no files", "[images][archive]") {
  CHECK(Open(WriteZip({}))->files().empty());
  CHECK(Open(WriteTar({}))->files().empty());
  CHECK(Open(WriteTar({{"only/", "", '5'}}))->files().empty());
}

TEST_CASE("a directory follows the same rules, links noted and not followed", "[images][archive]") {
  char tmpl[] = "/tmp/gleaner-images-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  std::string dir = tmpl;
  REQUIRE(files::MakeDirs(dir + "/sub/.hidden").ok());
  REQUIRE(files::WriteSynced(dir + "/sub/b.jpg", "B").ok());
  REQUIRE(files::WriteSynced(dir + "/a.txt", "A").ok());
  REQUIRE(files::WriteSynced(dir + "/sub/.hidden/c.jpg", "C").ok());
  REQUIRE(files::WriteSynced(dir + "/.DS_Store", "x").ok());
  REQUIRE(symlink("/etc/passwd", (dir + "/link.jpg").c_str()) == 0);
  Result<std::unique_ptr<FileSet>> f = OpenDirectory(dir, {});
  REQUIRE(f.ok());
  CHECK(Paths(**f) == std::vector<std::string>{"a.txt", "sub/b.jpg"});
  CHECK((*f)->notes() == std::vector<std::string>{"link.jpg: symbolic link, not followed"});
  CHECK(ReadAll(**f, 1) == "B");
  CHECK(files::RemoveTree(dir).ok());
}

TEST_CASE("SafeEntryPath and IsHiddenPath", "[images][archive]") {
  CHECK(*SafeEntryPath("a/b.jpg") == "a/b.jpg");
  CHECK(*SafeEntryPath("./a/./b.jpg") == "a/b.jpg");
  CHECK(*SafeEntryPath("a//b/") == "a/b");
  CHECK(*SafeEntryPath("./") == "");
  CHECK(*SafeEntryPath("..a/b..jpg") == "..a/b..jpg");
  CHECK(!SafeEntryPath("").ok());
  CHECK(!SafeEntryPath("a/../b").ok());
  CHECK(!SafeEntryPath(std::string("a\0b", 3)).ok());
  CHECK(IsHiddenPath("__MACOSX/a.jpg"));
  CHECK(IsHiddenPath("a/.b/c.jpg"));
  CHECK(IsHiddenPath(".x"));
  CHECK_FALSE(IsHiddenPath("a/b.c/d.jpg"));
  CHECK_FALSE(IsHiddenPath("__MACOSXa/b.jpg"));
}
