# frozen_string_literal: true
#
# trace_reader.rb - reads the tracer's files back for the tests: a Perfetto
# trace (our own minimal protobuf decoder, independent of the writer's
# code) or Chrome JSON, into tracks of slices, and rebuilds each track's
# call tree.  Field numbers: tests/trace/perfetto_min.proto.
module TraceReader
  # A track: name, tid (thread tracks), parent uuid, events [ts, type, name]
  # (type :begin/:end/:instant), args of instants.
  Track = Struct.new(:uuid, :name, :tid, :parent, :events)
  Node = Struct.new(:name, :children, :t0, :t1) do
    # "name{child,child}" with runs of equal children as "child*3".
    def to_s
      return name if children.empty?

      "#{name}{#{TraceReader.compact(children)}}"
    end
  end

  module_function

  def varint(buf, pos)
    v = 0
    shift = 0
    loop do
      b = buf.getbyte(pos)
      raise "truncated varint at #{pos}" unless b

      pos += 1
      v |= (b & 0x7f) << shift
      return [v, pos] if b < 0x80

      shift += 7
    end
  end

  # Fields of one message: {number => [values]} (varints as Integer,
  # length-delimited as binary String).
  def fields(buf)
    out = Hash.new { |h, k| h[k] = [] }
    pos = 0
    while pos < buf.bytesize
      key, pos = varint(buf, pos)
      case key & 7
      when 0 then v, pos = varint(buf, pos)
      when 2
        len, pos = varint(buf, pos)
        v = buf.byteslice(pos, len)
        raise "truncated field #{key >> 3}" if v.bytesize != len

        pos += len
      when 1 then v = buf.byteslice(pos, 8).unpack1("Q<"); pos += 8
      when 5 then v = buf.byteslice(pos, 4).unpack1("L<"); pos += 4
      else raise "wire type #{key & 7} at #{pos}"
      end
      out[key >> 3] << v
    end
    out
  end

  TYPES = { 1 => :begin, 2 => :end, 3 => :instant }.freeze

  # {uuid => Track} from a Perfetto file; also checks interning rules.
  def perfetto(path)
    data = File.binread(path)
    tracks = {}
    names = {}
    cleared = false
    fields(data)[1].each do |pk|
      p = fields(pk)
      raise "packet without trusted_packet_sequence_id 1" unless p[10] == [1]

      cleared ||= (p[13].first.to_i & 1) == 1
      p[12].each do |idata|
        fields(idata)[2].each do |en|
          e = fields(en)
          names[e[1].first] = e[2].first.force_encoding("UTF-8")
        end
      end
      p[60].each do |td|
        d = fields(td)
        uuid = d[1].first
        th = d[4].first && fields(d[4].first)
        pr = d[3].first && fields(d[3].first)
        name = th ? th[5].first : pr ? pr[6].first : d[2].first
        tracks[uuid] = Track.new(uuid, name&.force_encoding("UTF-8"), th && th[2].first, d[5].first, [])
      end
      p[11].each do |te|
        raise "track event before SEQ_INCREMENTAL_STATE_CLEARED" unless cleared
        raise "track event without SEQ_NEEDS_INCREMENTAL_STATE" unless p[13] == [2]

        e = fields(te)
        t = tracks[e[11].first] or raise "event on undescribed track #{e[11].first}"
        type = TYPES.fetch(e[9].first)
        name = nil
        if type != :end
          name = names[e[10].first] or raise "name_iid #{e[10].first} not interned"
        end
        # int64 values: two's complement varints
        args = e[4].to_h { |a| f = fields(a); v = f[4].first || f[3].first; [f[10].first, v && v >= 2**63 ? v - 2**64 : v] }
        t.events << [p[8].first, type, name, args]
      end
    end
    tracks
  end

  # {key => Track} from Chrome JSON (key: tid).
  def json(path)
    doc = JSON.parse(File.read(path))
    tracks = {}
    doc.fetch("traceEvents").each do |e|
      t = (tracks[e["tid"]] ||= Track.new(e["tid"], nil, e["tid"].positive? ? e["tid"] : nil, nil, []))
      case e["ph"]
      when "M" then t.name = e.dig("args", "name") if e["name"] == "thread_name"
      when "B" then t.events << [(e["ts"] * 1000).round, :begin, e["name"], {}]
      when "E" then t.events << [(e["ts"] * 1000).round, :end, nil, e["args"] || {}]
      when "i" then t.events << [(e["ts"] * 1000).round, :instant, e["name"], e["args"] || {}]
      end
    end
    tracks.delete(0) # the process name
    tracks
  end

  def read(path)
    File.binread(path, 1) == "{" ? json(path) : perfetto(path)
  end

  # The call forest of a track; raises when slices are unbalanced or time
  # goes backwards.
  def tree(track)
    root = Node.new("(root)", [], nil, nil)
    stack = [root]
    last = 0
    track.events.each do |ts, type, name, _|
      raise "#{track.name}: time goes backwards (#{ts} < #{last})" if ts < last

      last = ts
      case type
      when :begin
        n = Node.new(name, [], ts, nil)
        stack.last.children << n
        stack << n
      when :end
        raise "#{track.name}: end without begin at #{ts}" if stack.size == 1

        stack.pop.t1 = ts
      end
    end
    raise "#{track.name}: #{stack.size - 1} slices never end" if stack.size > 1

    root.children
  end

  def compact(nodes)
    out = []
    nodes.map(&:to_s).each do |s|
      if out.last && out.last[0] == s
        out.last[1] += 1
      else
        out << [s, 1]
      end
    end
    out.map { |s, n| n > 1 ? "#{s}*#{n}" : s }.join(",")
  end

  # "a{b,c*2},d" of a track.
  def tree_string(track, drop: nil)
    nodes = tree(track)
    nodes = prune(nodes, drop) if drop
    compact(nodes)
  end

  # Without nodes whose names match re (their children go too).
  def prune(nodes, re)
    nodes.reject { |n| n.name =~ re }.map { |n| Node.new(n.name, prune(n.children, re), n.t0, n.t1) }
  end

  def thread_track(tracks, name)
    tracks.values.find { |t| t.tid && t.name == name }
  end
end
