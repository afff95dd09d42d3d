//! The conditions of a guarded call, as the function takes them (`lua/guarded.lua`).

/// A condition of a guarded call, checked on the server before any command runs:
/// [`Guarded::when`](super::Guarded::when). Every condition must hold for the commands
/// to run; when one does not, the commands after [`otherwise`](super::Guarded::otherwise)
/// run instead (as etcd's `Txn().If(..).Then(..).Else(..)`).
///
/// ```
/// use cluster_rwlock::guarded::Condition;
/// let in_stock = Condition::field("stock:{42}", "n").gt(0);
/// let unpaid = Condition::value("orders:{42}:status").ne("paid");
/// let fresh = Condition::missing("orders:{42}:draft");
/// # let _ = (in_stock, unpaid, fresh);
/// ```
#[derive(Clone, Debug)]
#[must_use = "a condition does nothing until given to `when`"]
pub struct Condition {
    /// Its words as the function takes them (`lua/guarded.lua`), without their count.
    pub(super) words: Vec<Vec<u8>>,
}

/// What a [`Condition`] compares: the string value at a key ([`Condition::value`]) or a
/// field of a hash ([`Condition::field`]). A missing value, or one that is not an integer,
/// fails the integer comparisons (`lt`, `le`, `gt`, `ge`), which compare exactly (64
/// bits).
#[derive(Clone, Debug)]
#[must_use = "a comparison is made by `eq`, `gt`, `exists`, ..."]
pub struct Compare {
    /// The source and the key (and field) read.
    words: Vec<Vec<u8>>,
}

impl Condition {
    /// The key exists (of any type).
    ///
    /// ```
    /// let c = cluster_rwlock::guarded::Condition::exists("orders:{42}");
    /// # let _ = c;
    /// ```
    pub fn exists(key: impl AsRef<[u8]>) -> Condition {
        Condition {
            words: vec![b"e".to_vec(), key.as_ref().to_vec(), b"exists".to_vec()],
        }
    }

    /// The key does not exist.
    ///
    /// ```
    /// let c = cluster_rwlock::guarded::Condition::missing("orders:{42}:draft");
    /// # let _ = c;
    /// ```
    pub fn missing(key: impl AsRef<[u8]>) -> Condition {
        Condition {
            words: vec![b"e".to_vec(), key.as_ref().to_vec(), b"missing".to_vec()],
        }
    }

    /// The string value at `key` (`GET`), to compare. A key of another type makes the
    /// call fail before anything runs ([`Error::CommandFailed`](crate::Error::CommandFailed)).
    ///
    /// ```
    /// let c = cluster_rwlock::guarded::Condition::value("orders:{42}:status").eq("new");
    /// # let _ = c;
    /// ```
    pub fn value(key: impl AsRef<[u8]>) -> Compare {
        Compare {
            words: vec![b"k".to_vec(), key.as_ref().to_vec()],
        }
    }

    /// The field `field` of the hash at `key` (`HGET`), to compare.
    ///
    /// ```
    /// let c = cluster_rwlock::guarded::Condition::field("stock:{42}", "n").ge(1);
    /// # let _ = c;
    /// ```
    pub fn field(key: impl AsRef<[u8]>, field: impl AsRef<[u8]>) -> Compare {
        Compare {
            words: vec![
                b"f".to_vec(),
                key.as_ref().to_vec(),
                field.as_ref().to_vec(),
            ],
        }
    }

    /// The key it reads.
    pub(super) fn key(&self) -> &[u8] {
        &self.words[1]
    }
}

impl Compare {
    fn with(mut self, test: &str, operand: Option<Vec<u8>>) -> Condition {
        self.words.push(test.as_bytes().to_vec());
        self.words.extend(operand);
        Condition { words: self.words }
    }

    /// The value is there.
    ///
    /// ```
    /// let c = cluster_rwlock::guarded::Condition::field("orders:{42}", "paid_at").exists();
    /// # let _ = c;
    /// ```
    pub fn exists(self) -> Condition {
        self.with("exists", None)
    }

    /// The value is not there.
    ///
    /// ```
    /// let c = cluster_rwlock::guarded::Condition::field("orders:{42}", "paid_at").missing();
    /// # let _ = c;
    /// ```
    pub fn missing(self) -> Condition {
        self.with("missing", None)
    }

    /// The value is these bytes (a missing value is not).
    ///
    /// ```
    /// let c = cluster_rwlock::guarded::Condition::value("orders:{42}:status").eq("new");
    /// # let _ = c;
    /// ```
    pub fn eq(self, bytes: impl AsRef<[u8]>) -> Condition {
        self.with("eq", Some(bytes.as_ref().to_vec()))
    }

    /// The value is not these bytes (a missing value is not them).
    ///
    /// ```
    /// let c = cluster_rwlock::guarded::Condition::value("orders:{42}:status").ne("paid");
    /// # let _ = c;
    /// ```
    pub fn ne(self, bytes: impl AsRef<[u8]>) -> Condition {
        self.with("ne", Some(bytes.as_ref().to_vec()))
    }

    /// The value is an integer below `n`.
    ///
    /// ```
    /// let c = cluster_rwlock::guarded::Condition::field("stock:{42}", "n").lt(100);
    /// # let _ = c;
    /// ```
    pub fn lt(self, n: i64) -> Condition {
        self.with("lt", Some(n.to_string().into_bytes()))
    }

    /// The value is an integer at most `n`.
    ///
    /// ```
    /// let c = cluster_rwlock::guarded::Condition::field("stock:{42}", "n").le(99);
    /// # let _ = c;
    /// ```
    pub fn le(self, n: i64) -> Condition {
        self.with("le", Some(n.to_string().into_bytes()))
    }

    /// The value is an integer above `n`.
    ///
    /// ```
    /// let c = cluster_rwlock::guarded::Condition::field("stock:{42}", "n").gt(0);
    /// # let _ = c;
    /// ```
    pub fn gt(self, n: i64) -> Condition {
        self.with("gt", Some(n.to_string().into_bytes()))
    }

    /// The value is an integer at least `n`.
    ///
    /// ```
    /// let c = cluster_rwlock::guarded::Condition::field("stock:{42}", "n").ge(1);
    /// # let _ = c;
    /// ```
    pub fn ge(self, n: i64) -> Condition {
        self.with("ge", Some(n.to_string().into_bytes()))
    }
}
