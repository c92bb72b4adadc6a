# frozen_string_literal: true
#
# examples/app.rb - a small order-processing service to try rbpeek on.
#
# The main thread receives orders as JSON (generated here, as if read from a
# queue), two worker threads parse, price and fraud-check them and write
# receipts, and a reporter thread prints throughput now and then.  Almost all
# the time goes to one place: Shop::FraudCheck#risk_score, which re-scores
# the customer's whole order history for every order.  A profiler should
# point straight at it.
#
#   ruby examples/app.rb [SECONDS]     (default 10)
require "json"

module Shop
  Item = Struct.new(:sku, :qty)
  Order = Struct.new(:id, :customer, :items)

  class Catalog
    def initialize(size)
      rng = Random.new(1)
      @prices = (1..size).to_h { |n| ["SKU-#{n}", rng.rand(100..10_000)] }
    end

    def skus
      @prices.keys
    end

    def price_cents(sku)
      @prices.fetch(sku)
    end
  end

  class Pricing
    TAX_RATE = 0.19

    def initialize(catalog)
      @catalog = catalog
    end

    def total_cents(order)
      net = order.items.sum { |item| @catalog.price_cents(item.sku) * item.qty }
      (net * (1 + TAX_RATE)).round
    end
  end

  class FraudCheck
    def initialize
      @history = Hash.new { |h, k| h[k] = [] }
    end

    def suspicious?(order, total)
      history = @history[order.customer]
      history << total
      risk_score(history) > 0.97
    end

    # The hot spot: an O(n) pass over the customer's history per order.
    def risk_score(history)
      mean = history.sum.to_f / history.size
      spread = history.sum { |t| (t - mean)**2 } / history.size
      weight = 0.0
      history.each_with_index { |t, i| weight += Math.sqrt(t * (i + 1)) % 1.0 }
      (weight / history.size + (spread.zero? ? 0 : 0.01)).clamp(0.0, 1.0)
    end
  end

  class Worker
    attr_reader :processed, :flagged

    def initialize(queue, pricing, fraud)
      @queue, @pricing, @fraud = queue, pricing, fraud
      @processed = @flagged = 0
    end

    def run
      while (raw = @queue.pop)
        order = parse(raw)
        total = @pricing.total_cents(order)
        @flagged += 1 if @fraud.suspicious?(order, total)
        receipt(order, total)
        @processed += 1
      end
    end

    def parse(raw)
      data = JSON.parse(raw)
      items = data.fetch("items").map { |i| Item.new(i.fetch("sku"), i.fetch("qty")) }
      Order.new(data.fetch("id"), data.fetch("customer"), items)
    end

    def receipt(order, total)
      JSON.generate(id: order.id, customer: order.customer, total_cents: total)
    end
  end
end

seconds = (ARGV[0] || 10).to_f
catalog = Shop::Catalog.new(500)
pricing = Shop::Pricing.new(catalog)
queue = SizedQueue.new(100)
workers = 2.times.map do |n|
  fraud = Shop::FraudCheck.new
  worker = Shop::Worker.new(queue, pricing, fraud)
  Thread.new { Thread.current.name = "worker-#{n + 1}"; worker.run }
  worker
end
Thread.new do
  Thread.current.name = "reporter"
  loop do
    sleep 2
    puts "processed #{workers.sum(&:processed)} orders"
    $stdout.flush
  end
end

puts "processing orders for #{seconds} s (pid #{Process.pid})"
$stdout.flush
rng = Random.new(2)
skus = catalog.skus
deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
id = 0
while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  id += 1
  items = Array.new(rng.rand(1..5)) { { sku: skus.sample(random: rng), qty: rng.rand(1..3) } }
  queue << JSON.generate(id: id, customer: "customer-#{rng.rand(20)}", items: items)
end
2.times { queue << nil }
sleep 0.1 until queue.empty?
puts "done: #{workers.sum(&:processed)} orders, #{workers.sum(&:flagged)} flagged"
