# 場所.rb - a file with a non-ASCII path and non-ASCII method names, loaded by
# unicode.rb.
class Größe
  def self.erstellen
    new.grüße
  end

  def grüße
    RbpeekTarget.ready!
    sleep
  end
end

module Ökonomie
  def self.rechne
    Thread.current.name = "ワーカー"
    [1, 2].each do
      sleep
    end
  end
end
