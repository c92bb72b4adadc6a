# frozen_string_literal: true
#
# found_rubies.rb - the Rubies of this machine that version managers (or a
# developer's `make install`) put in their usual places, and the Rubies
# built from Debian source packages by tools/build-debian-ruby.sh; the
# multi-version tests run them next to the Debian chroots' Rubies.
#
#   /opt/rubies/*                        by hand, ruby-install (system-wide)
#   ~/.rubies/*                          ruby-install + chruby
#   ~/.rbenv/versions/*                  rbenv + ruby-build
#   ~/.local/share/mise/installs/ruby/*  mise
#   ~/.asdf/installs/ruby/*              asdf
#   $RBPEEK_TEST_RUBIES                  colon-separated ruby executables or
#                                        prefixes (PREFIX/bin/ruby)
#   tools/build-debian-ruby.sh --list    its "yjit" variant's prefix
#
# Each is a Ruby of the host's root (dir "/"), so the chroot helpers of
# lib/chroot.rb run it with `chroot / ...`.  Its test-name prefix says the
# version and where it came from: ruby4.0.5@opt:4.0.5, ruby3.3.8@debsrc:yjit.

require "open3"
require_relative "e2e"

module FoundRubies
  HOME = Dir.home
  PLACES = {
    "opt" => "/opt/rubies",
    "rubies" => File.join(HOME, ".rubies"),
    "rbenv" => File.join(HOME, ".rbenv/versions"),
    "mise" => File.join(HOME, ".local/share/mise/installs/ruby"),
    "asdf" => File.join(HOME, ".asdf/installs/ruby")
  }.freeze
  DEBSRC = File.join(E2E::ROOT, "tools", "build-debian-ruby.sh")

  # exe the ruby executable, origin "opt:4.0.5", version "4.0.5", libruby
  # the file that holds the VM (libruby.so, or exe when linked statically),
  # flags what the targets run with (["--yjit"])
  Ruby = Struct.new(:exe, :origin, :version, :libruby, :flags) do
    def xy
      version[/\A\d+\.\d+/]
    end

    def dir
      "/"
    end

    def bin
      [exe, *flags].join(" ")
    end

    def prefix
      jit = %w[yjit zjit].find { |j| flags&.include?("--#{j}") }
      "ruby#{version}@#{origin}#{jit ? "+#{jit}" : ''}"
    end

    # The same Ruby, its targets run with these flags.
    def with_flags(*more)
      dup.tap { |r| r.flags = [*flags, *more] }
    end

    def key
      prefix.tr("/:@+", "----")
    end

    def host_path(inner)
      inner
    end

    def exports_vm_symbol?
      FoundRubies.vm_symbol_in?(libruby)
    end
  end

  module_function

  # Whether the file has a VM symbol (Debian's 3.3 and 3.4 export none and
  # strip .symtab): its name is then nowhere in the file's string tables.
  def vm_symbol_in?(lib)
    return false unless lib

    data = File.binread(lib)
    data.include?("\0ruby_current_vm_ptr\0") || data.include?("\0ruby_current_vm\0")
  end

  # Where the Rubies were looked for, for a skip's reason.
  def where
    PLACES.values.map { |d| "#{d}/*" }.join(", ") + ", $RBPEEK_TEST_RUBIES, tools/build-debian-ruby.sh"
  end

  # [[origin, executable]] of every candidate.
  def candidates
    list = PLACES.flat_map do |tag, dir|
      Dir.glob(File.join(dir, "*")).sort.map { |d| ["#{tag}:#{File.basename(d)}", File.join(d, "bin", "ruby")] }
    end
    ENV.fetch("RBPEEK_TEST_RUBIES", "").split(":").reject(&:empty?).each_with_index do |e, i|
      exe = File.directory?(e) ? File.join(e, "bin", "ruby") : e
      list << ["env:#{i + 1}", exe]
    end
    if E2E.root? && File.executable?(DEBSRC)
      E2E.run([DEBSRC, "--list"], timeout: 10).stdout.to_s.each_line do |l|
        variant, dir = l.split
        exe = File.join(dir, "prefix", "bin", "ruby")
        list << ["debsrc:#{variant}", exe] if File.executable?(exe)
      end
    end
    list
  end

  # The Rubies that run, once each (by real path); memoized.
  def all
    @all ||= begin
      seen = {}
      candidates.filter_map do |origin, exe|
        next unless File.file?(exe) && File.executable?(exe)

        real = File.realpath(exe)
        next if seen[real]

        seen[real] = true
        describe(origin, exe)
      end
    end
  end

  # Ask the Ruby itself its version; its VM lives in the libruby ldd names,
  # else (linked statically) in the executable.
  def describe(origin, exe)
    out, status = Open3.capture2(exe, "--disable-gems", "-e", "print RUBY_VERSION", err: File::NULL)
    return nil unless status.success?

    libs, = Open3.capture2("ldd", exe, err: File::NULL)
    lib = libs[%r{=>\s*(/\S*libruby[^\s]*)}, 1] || File.realpath(exe)
    Ruby.new(exe, origin, out.strip, File.file?(lib) ? lib : nil)
  rescue SystemCallError
    nil
  end
end
